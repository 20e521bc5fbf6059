//! The checkpoint module's own tests: what only its private parts show.

use std::collections::BTreeMap;

use super::reader::{HeaderProblem, HEADERS_PARSED};
use super::schema::{join, ACTIVATION, ACTIVATION_KEY, SIZES_KEY};
use super::writer::{serialize, StoredTensor};
use super::*;

fn stored(name: String, shape: Vec<usize>) -> StoredTensor {
    let elements: usize = shape.iter().product();
    StoredTensor {
        name,
        dtype: "F32",
        bytes: (0..elements)
            .flat_map(|index| (index as f32 * 0.25).to_le_bytes())
            .collect(),
        shape,
    }
}

/// Every tensor of a file read, as model() and load_into read them, parses its header no more than the
/// read did; before, each tensor re-parsed the whole JSON (a 90 MB metadata value made `predict` take 31 s).
#[test]
fn a_files_header_is_parsed_once_however_many_tensors_are_read() {
    const LAYERS: usize = 40;
    let sizes = vec![3; LAYERS + 1];
    let mut metadata = BTreeMap::new();
    metadata.insert(FORMAT_KEY.to_string(), FORMAT.to_string());
    metadata.insert(SIZES_KEY.to_string(), join(&sizes));
    metadata.insert(ACTIVATION_KEY.to_string(), ACTIVATION.to_string());
    metadata.insert("notes".to_string(), "x".repeat(1 << 20));
    let tensors: Vec<StoredTensor> = (0..LAYERS)
        .flat_map(|layer| {
            [
                stored(parameter_name(layer, Part::Weight), vec![3, 3]),
                stored(parameter_name(layer, Part::Bias), vec![3]),
            ]
        })
        .collect();
    let path = std::env::temp_dir().join(format!(
        "wgcompute-parsed-once-{}.safetensors",
        std::process::id()
    ));
    std::fs::write(&path, serialize(&metadata, &tensors)).expect("write");

    HEADERS_PARSED.with(|count| count.set(0));
    let checkpoint = Checkpoint::read(&path).expect("read");
    let _ = std::fs::remove_file(&path);
    assert_eq!(HEADERS_PARSED.with(std::cell::Cell::get), 1);
    assert_eq!(checkpoint.sizes().expect("ours"), sizes);
    assert_eq!(checkpoint.names().expect("names").len(), 2 * LAYERS);
    for tensor in &tensors {
        let values = checkpoint
            .values(&tensor.name, &tensor.shape)
            .expect("a parameter");
        assert_eq!(values, f32_values(&tensor.bytes), "{}", tensor.name);
    }
    assert_eq!(HEADERS_PARSED.with(std::cell::Cell::get), 1);
}

fn scratch_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "wgcompute-checkpoint-{name}-{}.safetensors",
        std::process::id()
    ))
}

/// The source of a checkpoint error on `path`, as the type the refusal came from.
fn source_of<'a, T: std::error::Error + 'static>(error: &'a Error, path: &Path) -> &'a T {
    match error {
        Error::Checkpoint { path: named, .. } => {
            assert_eq!(named, &path.display().to_string())
        }
        other => panic!("expected a checkpoint error, got {other:?}"),
    }
    std::error::Error::source(error)
        .unwrap_or_else(|| panic!("no source: {error:?}"))
        .downcast_ref::<T>()
        .unwrap_or_else(|| panic!("a source of another type: {error:?}"))
}

#[test]
fn a_file_that_cannot_be_read_or_written_keeps_the_io_error_as_its_source() {
    let missing = scratch_path("missing");
    let _ = std::fs::remove_file(&missing);
    let error = Checkpoint::read(&missing)
        .err()
        .expect("a missing file is refused");
    assert_eq!(
        source_of::<std::io::Error>(&error, &missing).kind(),
        std::io::ErrorKind::NotFound
    );
    assert!(error.to_string().contains("cannot read it"), "{error}");

    let nowhere = scratch_path("no-such-folder").join("model.safetensors");
    let error = write_whole(&nowhere, b"bytes").expect_err("no folder to write in");
    let cause = source_of::<std::io::Error>(&error, &nowhere);
    assert!(
        error.to_string().contains(&cause.to_string()),
        "{error} names {cause}"
    );
}

#[cfg(unix)]
#[test]
fn a_save_follows_links_to_files_and_leaves_devices_and_fifos_as_they_were() {
    use std::os::unix::fs::FileTypeExt;
    let folder = tempfile::tempdir().expect("a scratch folder");
    let fifo = folder.path().join("fifo");
    crate::files::tests::make_fifo(&fifo);
    let to_null = folder.path().join("null.safetensors");
    std::os::unix::fs::symlink("/dev/null", &to_null).expect("a link to /dev/null");
    for (target, kind) in [
        (fifo.as_path(), "a FIFO"),
        (to_null.as_path(), "a character device"),
        (Path::new("/dev/null"), "a character device"),
    ] {
        let error = write_whole(target, b"bytes").expect_err("not a regular file");
        assert!(error.to_string().contains(kind), "{error}");
    }
    assert!(std::fs::symlink_metadata(&fifo)
        .expect("the FIFO")
        .file_type()
        .is_fifo());
    assert!(std::fs::metadata("/dev/null")
        .expect("/dev/null")
        .file_type()
        .is_char_device());
    let real = folder.path().join("real.safetensors");
    let link = folder.path().join("link.safetensors");
    std::fs::write(&real, b"old").expect("a file");
    std::os::unix::fs::symlink(&real, &link).expect("a link");
    write_whole(&link, b"new").expect("a link to a file is written through");
    assert!(std::fs::symlink_metadata(&link)
        .expect("the link")
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read(&real).expect("the file"), b"new");
}

#[test]
fn a_malformed_header_keeps_the_parsers_error_as_its_source() {
    let file = |name: &str, header: &[u8]| {
        let path = scratch_path(name);
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header);
        std::fs::write(&path, bytes).expect("write");
        let error = Checkpoint::read(&path).err().expect("refused");
        let _ = std::fs::remove_file(&path);
        (path, error)
    };
    let (path, error) = file("broken-json", b"{\"a\":");
    let cause = source_of::<serde_json::Error>(&error, &path);
    assert!(cause.is_eof(), "{cause}");
    assert!(
        error.to_string().contains("not a valid safetensors file"),
        "{error}"
    );
    // The safetensors crate refuses a bad layout from within the JSON parser: a data error of its own.
    let (path, error) = file(
        "gap",
        br#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}"#,
    );
    assert!(source_of::<serde_json::Error>(&error, &path).is_data());
    let (path, error) = file("not-utf8", b"{\"\xff\":1}");
    source_of::<std::str::Utf8Error>(&error, &path);
}

fn layout_of(header: &str) -> std::result::Result<StoredLayout, HeaderProblem> {
    StoredLayout::parse(header.as_bytes())
}

/// The layout is checked as the safetensors crate checks it, with the header alone: tensors tile the data
/// from 0, each as long as its dtype and shape make it.
#[test]
fn a_header_alone_gives_the_datas_length_or_is_refused() {
    let two = concat!(
        r#"{"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},"#,
        r#""a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}"#
    );
    let layout = layout_of(two).expect("two contiguous tensors");
    assert_eq!(layout.data_bytes, 16);
    assert_eq!(layout.names(), ["a", "b"]);
    assert_eq!(
        layout_of(r#"{"__metadata__":{"k":"v"}}"#)
            .expect("no tensors")
            .data_bytes,
        0
    );
    for (header, problem) in [
        (
            r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}"#,
            "a gap before the first",
        ),
        (
            concat!(
                r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"#,
                r#""b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}}"#
            ),
            "a gap between two",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#,
            "a length its shape does not make",
        ),
        (
            r#"{"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}}"#,
            "a shape whose size overflows",
        ),
        ("{\"a\":", "broken JSON"),
    ] {
        assert!(layout_of(header).is_err(), "{problem}: {header}");
    }
    assert!(StoredLayout::parse(b"{\"\xff\":1}").is_err_and(|error| error.text.contains("UTF-8")));
}

/// The header is serde_json's, with the escapes every saved file holds: each character below 0x80 and some
/// beyond in metadata keys, values and tensor names, the tensors in the order given (not by name). The
/// expected text is built here from JSON's rules, so a change of escape or order fails.
#[test]
fn the_header_escapes_as_saved_files_do_and_keeps_the_tensors_order() {
    let escaped = |text: &str| -> String {
        let mut out = String::from("\"");
        for character in text.chars() {
            match character {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                control if (control as u32) < 0x20 => {
                    out.push_str(&format!("\\u{:04x}", control as u32))
                }
                other => out.push(other),
            }
        }
        out.push('"');
        out
    };
    let every: String = (0u8..0x80).map(char::from).chain("é€😀".chars()).collect();
    let metadata = BTreeMap::from([
        (every.clone(), "plain".to_string()),
        ("a key".to_string(), every.clone()),
    ]);
    let tensors = vec![
        stored("z".into(), vec![2]),
        stored(every.clone(), vec![1, 3]),
    ];
    let bytes = serialize(&metadata, &tensors);
    let length = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + length]).expect("UTF-8");
    let want = format!(
        "{{\"__metadata__\":{{{}:{},{}:{}}},\"z\":{{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}},{}:{{\"dtype\":\"F32\",\"shape\":[1,3],\"data_offsets\":[8,20]}}}}",
        // In key order: `every` starts with U+0000.
        escaped(&every),
        escaped("plain"),
        escaped("a key"),
        escaped(&every),
        escaped(&every),
    );
    assert_eq!(header.trim_end_matches(' '), want);
    assert_eq!(length % 8, 0);
    assert_eq!(bytes.len(), 8 + length + 20);
}
