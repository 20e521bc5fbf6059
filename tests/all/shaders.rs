//! Every WGSL file in shaders/ parses and validates with naga, found by listing the folder (no hand-kept list).

use std::path::Path;

#[test]
fn every_shader_parses_and_validates() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
    let mut checked = 0;
    for entry in std::fs::read_dir(&folder).expect("shaders/ exists") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|ext| ext.to_str()) != Some("wgsl") {
            continue;
        }
        let source = std::fs::read_to_string(&path).expect("readable");
        let module = naga::front::wgsl::parse_str(&source).unwrap_or_else(|error| {
            panic!("{}: {}", path.display(), error.emit_to_string(&source))
        });
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::default(),
        )
        .validate(&module)
        .unwrap_or_else(|error| panic!("{}: {}", path.display(), error.emit_to_string(&source)));
        assert!(
            !module.entry_points.is_empty(),
            "{} has no entry point",
            path.display()
        );
        checked += 1;
    }
    assert!(checked > 0, "no shaders found in {}", folder.display());
}
