//! The crate's layers, read from its own `use` lines: each module of `src/` takes names only from modules
//! below it in `LAYERS`, so there is no circle and no import that runs up (the op vocabulary at the bottom,
//! the training loop near the top). A new module must be given its place here; one that imports upward fails,
//! naming the line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Bottom first: a module may take names from those before it (and from itself), never from those after.
const LAYERS: &[&str] = &[
    "dtype",
    "files",
    "op",
    "error",
    "outputs",
    "shape",
    "pool",
    "device",
    "runtime",
    "kernels",
    "tensor",
    "ops",
    "session",
    "autograd",
    "optim",
    "nn",
    "train",
    "checkpoint",
    "data",
    "fit",
    "bench",
];

/// The top layer: it measures the library through its public API, the crate root's names.
const USES_THE_PUBLIC_API: &str = "bench";

fn sources(folder: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(folder).expect("the source folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            found.push(path);
        }
    }
}

/// The module of `src/` a file belongs to: `src/kernels/reduce.rs` and `src/kernels/mod.rs` are `kernels`.
fn module_of(source_root: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(source_root).expect("under src");
    let first = relative
        .components()
        .next()
        .expect("a component")
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    first.trim_end_matches(".rs").to_string()
}

#[test]
fn every_module_imports_only_from_the_layers_below_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    files.sort();
    let layer: BTreeMap<&str, usize> = LAYERS
        .iter()
        .enumerate()
        .map(|(index, name)| (*name, index))
        .collect();
    let mut upward = Vec::new();
    for file in &files {
        let module = module_of(&root, file);
        // The crate root re-exports every layer. (The command sits above them all, in a crate of its own.)
        if module == "lib" {
            continue;
        }
        let Some(&own) = layer.get(module.as_str()) else {
            panic!("{}: module {module} has no place in LAYERS", file.display());
        };
        let text = std::fs::read_to_string(file).expect("a source file");
        for (number, line) in text.lines().enumerate() {
            let code = line.trim_start();
            // Comments and docs name modules in prose; a doc link is checked by rustdoc, not here.
            let code = match code.find("//") {
                Some(0) => continue,
                Some(at) => &code[..at],
                None => code,
            };
            for (at, _) in code.match_indices("crate::") {
                let rest = &code[at + "crate::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let Some(&theirs) = layer.get(name.as_str()) else {
                    // An item the crate root defines or re-exports: the public API, which the top layer (the
                    // benchmarks, written as a user writes) may use; below it, a name from above every layer.
                    if module == USES_THE_PUBLIC_API {
                        continue;
                    }
                    upward.push(format!(
                        "{}:{}: `crate::{name}` is the crate root's; take it from the module that defines it",
                        file.display(),
                        number + 1
                    ));
                    continue;
                };
                if theirs > own {
                    upward.push(format!(
                        "{}:{}: {module} takes from {name}, which is above it",
                        file.display(),
                        number + 1
                    ));
                }
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports that run up:\n{}",
        upward.join("\n")
    );
}
