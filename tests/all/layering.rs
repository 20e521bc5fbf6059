//! The crate's layers, read from its own `use` lines: each module of `src/` takes names only from modules
//! below it in `LAYERS`, so there is no circle and no import that runs up (the op vocabulary at the bottom,
//! the training loop near the top). A new module must be given its place here; one that imports upward fails,
//! naming the line. Inside a module directory the files may import one another in any order but a circle.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Bottom first: a module may take names from those before it (and from itself), never from those after.
pub(crate) const LAYERS: &[&str] = &[
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
    "losses",
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

/// The files of a module directory (`src/fit/`, `src/autograd/`, ...): each file's siblings that it names with
/// `super::sibling`, and those `mod.rs` names with `sibling::` (a child's `super::Item` is the directory's own
/// face, not a sibling, and is left out).
fn sibling_imports(folder: &Path) -> BTreeMap<String, Vec<String>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(folder).expect("a module folder") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
    let stem = |path: &Path| {
        path.file_stem()
            .expect("a file name")
            .to_string_lossy()
            .into_owned()
    };
    let siblings: Vec<String> = files
        .iter()
        .map(|path| stem(path))
        .filter(|name| name != "mod")
        .collect();
    let mut imports = BTreeMap::new();
    for file in &files {
        let own = stem(file);
        let text = std::fs::read_to_string(file).expect("a source file");
        let mut named = Vec::new();
        for line in text.lines() {
            let code = line.trim_start();
            let code = match code.find("//") {
                Some(0) => continue,
                Some(at) => &code[..at],
                None => code,
            };
            if code.starts_with("mod ") || code.starts_with("pub mod ") {
                continue;
            }
            for sibling in &siblings {
                if *sibling == own {
                    continue;
                }
                let from_a_child = format!("super::{sibling}::");
                let from_a_child_list = format!("super::{sibling}");
                let from_the_face = format!("{sibling}::");
                let names_it = if own == "mod" {
                    code.match_indices(&from_the_face).any(|(at, _)| {
                        !code[..at]
                            .ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':')
                    })
                } else {
                    code.contains(&from_a_child)
                        || code.match_indices(&from_a_child_list).any(|(at, _)| {
                            !code[at + from_a_child_list.len()..]
                                .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                        })
                };
                if names_it && !named.contains(sibling) {
                    named.push(sibling.clone());
                }
            }
        }
        imports.insert(own, named);
    }
    imports
}

/// A circle among the files of one module directory, if there is one: the files along it.
fn circle_in(imports: &BTreeMap<String, Vec<String>>) -> Option<Vec<String>> {
    fn visit(
        file: &str,
        imports: &BTreeMap<String, Vec<String>>,
        path: &mut Vec<String>,
        done: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|seen| seen == file) {
            let mut circle = path[at..].to_vec();
            circle.push(file.to_string());
            return Some(circle);
        }
        if done.iter().any(|finished| finished == file) {
            return None;
        }
        path.push(file.to_string());
        for next in imports.get(file).into_iter().flatten() {
            if let Some(circle) = visit(next, imports, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.push(file.to_string());
        None
    }
    let mut done = Vec::new();
    imports
        .keys()
        .find_map(|file| visit(file, imports, &mut Vec::new(), &mut done))
}

#[test]
fn the_files_of_every_module_directory_import_each_other_without_a_circle() {
    fn folders(folder: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(folder).expect("the source folder") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                found.push(path.clone());
                folders(&path, found);
            }
        }
    }
    let mut found = Vec::new();
    for crate_root in ["src", "cli/src"] {
        folders(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join(crate_root),
            &mut found,
        );
    }
    found.sort();
    assert!(
        found.iter().any(|folder| folder.ends_with("autograd")),
        "the module directories were not found: {found:?}"
    );
    let circles: Vec<String> = found
        .iter()
        .filter_map(|folder| {
            circle_in(&sibling_imports(folder))
                .map(|circle| format!("{}: {}", folder.display(), circle.join(" -> ")))
        })
        .collect();
    assert!(
        circles.is_empty(),
        "files of one module that import each other:\n{}",
        circles.join("\n")
    );
}

#[test]
fn a_circle_between_sibling_files_is_found() {
    let imports = BTreeMap::from([
        ("a".to_string(), vec!["b".to_string()]),
        ("b".to_string(), vec!["c".to_string()]),
        ("c".to_string(), vec!["a".to_string()]),
        ("d".to_string(), vec!["a".to_string()]),
    ]);
    assert_eq!(
        circle_in(&imports),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    let layered = BTreeMap::from([
        ("a".to_string(), vec!["b".to_string(), "c".to_string()]),
        ("b".to_string(), vec!["c".to_string()]),
        ("c".to_string(), Vec::new()),
    ]);
    assert_eq!(circle_in(&layered), None);
}
