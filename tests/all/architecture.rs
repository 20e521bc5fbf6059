//! docs/architecture.md against the tree: its list of modules names every file and folder of `src/` and the
//! project's top-level folders it describes, and only paths that exist; its list of kernel families is the
//! modules of `src/kernels/`; its order of layers is the one `layering` enforces. A module added, moved or
//! removed without the page fails here, naming what differs.

use std::collections::BTreeSet;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn page() -> String {
    std::fs::read_to_string(root().join("docs/architecture.md")).expect("docs/architecture.md")
}

/// The text block under "## The modules": the paths at the start of its lines, each with what follows it.
fn module_list(page: &str) -> Vec<String> {
    let section = page
        .split("## The modules")
        .nth(1)
        .expect("a section \"## The modules\"");
    let block = section
        .split("```text\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a text block in \"## The modules\"");
    block
        .lines()
        .filter(|line| !line.starts_with(' ') && !line.is_empty())
        .map(|line| {
            line.split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// The names of a folder's entries, folders with a trailing `/`, leaving hidden ones out.
fn entries(folder: &Path) -> BTreeSet<String> {
    std::fs::read_dir(folder)
        .expect("a folder of the tree")
        .map(|entry| {
            let path = entry.expect("an entry").path();
            let name = path
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned();
            if path.is_dir() {
                format!("{name}/")
            } else {
                name
            }
        })
        .filter(|name| !name.starts_with('.'))
        .collect()
}

/// The comma-separated words between `opening` and the next `)` (or `.` where `closing` says so), with "and"
/// and backticks dropped and the text's line breaks joined.
fn listed_after(text: &str, opening: &str, closing: char) -> Vec<String> {
    let start = text
        .find(opening)
        .unwrap_or_else(|| panic!("the page says {opening:?}"))
        + opening.len();
    let rest = &text[start..];
    let list = &rest[..rest.find(closing).expect("the list's end")];
    list.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .split(',')
        .flat_map(|part| part.split(" and "))
        .map(|part| part.trim().to_string())
        .filter(|part| !part.is_empty())
        .collect()
}

#[test]
fn the_module_list_names_every_module_of_src_and_only_paths_that_exist() {
    let listed = module_list(&page());
    for path in &listed {
        assert!(
            root().join(path).exists(),
            "docs/architecture.md lists {path}, which the tree does not have"
        );
    }
    let listed: BTreeSet<&str> = listed.iter().map(String::as_str).collect();
    for entry in entries(&root().join("src")) {
        let path = format!("src/{entry}");
        assert!(
            listed.contains(path.as_str()),
            "src/ has {path}, which docs/architecture.md's list of modules does not name"
        );
    }
    for folder in ["shaders/", "benches/", "tests/all/", "cli/", "python/"] {
        assert!(
            listed.contains(folder),
            "the list of modules leaves out {folder}"
        );
    }
}

#[test]
fn the_kernel_families_named_are_the_modules_of_src_kernels() {
    let page = page();
    let named: BTreeSet<String> = listed_after(&page, "one module per op family (", ')')
        .into_iter()
        .collect();
    let modules: BTreeSet<String> = entries(&root().join("src/kernels"))
        .into_iter()
        .map(|entry| {
            entry
                .trim_end_matches('/')
                .trim_end_matches(".rs")
                .to_string()
        })
        // The module's root and its planning, which serve every family.
        .filter(|module| module != "mod" && module != "plan")
        .collect();
    assert_eq!(named, modules, "docs/architecture.md's kernel families");
}

#[test]
fn the_layers_named_are_the_order_layering_enforces() {
    let page = page();
    let sentence = listed_after(&page, "below it, bottom first: ", '(');
    // Each item names its module in backticks, with a word or two beside it ("the op vocabulary `op`").
    let named: Vec<String> = sentence
        .iter()
        .map(|item| {
            item.split('`')
                .nth(1)
                .unwrap_or_else(|| panic!("{item:?} names no module in backticks"))
                .to_string()
        })
        .collect();
    assert_eq!(
        named,
        crate::layering::LAYERS,
        "docs/architecture.md's order of layers"
    );
}

#[test]
fn a_stale_list_fails() {
    // What the checks read: a page naming a folder that went and leaving out a family fails them.
    let stale = "## The modules\n```text\nsrc/lib.rs   root\nsrc/shape.rs gone\n```\n";
    assert_eq!(module_list(stale), ["src/lib.rs", "src/shape.rs"]);
    assert!(!root().join("src/shape.rs").exists());
    assert_eq!(
        listed_after(
            "one module per op family (a, b\n  and c), each",
            "family (",
            ')'
        ),
        ["a", "b", "c"]
    );
}

/// Whitespace runs made one space, so that a row wrapped differently in a page and in the source compares equal.
fn squeezed(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The code spans of a page (between single backticks, fenced blocks left out) that quote a row of an op table:
/// they end with `";`.
fn quoted_rows(page: &str) -> Vec<String> {
    let mut fenced = false;
    let prose: String = page
        .lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect::<Vec<_>>()
        .join("\n");
    prose
        .split('`')
        .skip(1)
        .step_by(2)
        .map(squeezed)
        .filter(|span| span.ends_with("\";"))
        .collect()
}

#[test]
fn the_rows_the_pages_quote_are_rows_of_the_op_tables() {
    let mut tables = String::new();
    for entry in entries(&root().join("src/op")) {
        tables += &std::fs::read_to_string(root().join("src/op").join(&entry)).expect("an op file");
    }
    let tables = squeezed(&tables);
    let mut quoted = 0;
    for page in ["CONTRIBUTING.md", "docs/architecture.md"] {
        let text = std::fs::read_to_string(root().join(page)).expect("the page");
        for row in quoted_rows(&text) {
            assert!(
                tables.contains(&row),
                "{page} quotes a row that no op table has: {row}"
            );
            quoted += 1;
        }
    }
    // The recipes quote an elementwise row (twice) and a reduction's.
    assert!(quoted >= 3, "{quoted} rows quoted");
    assert_eq!(
        quoted_rows("```sh\nx `y\n```\na `pub Log2 log2 [] \"log2(x)\"\n  \"doc\";` row, `other`"),
        ["pub Log2 log2 [] \"log2(x)\" \"doc\";"]
    );
}

/// The paths a page's prose names under the project's top folders (`src/kernels/`, `python/tests/references.py`),
/// fenced blocks left out; a placeholder (`shaders/NAME.wgsl`) is not a path.
fn named_paths(page: &str) -> Vec<String> {
    const ROOTS: [&str; 9] = [
        "src/",
        "tests/",
        "python/",
        "cli/",
        "shaders/",
        "benches/",
        "scripts/",
        "docs/",
        "examples/",
    ];
    let mut fenced = false;
    let mut paths = Vec::new();
    for line in page.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let is_path_char = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
        for token in line.split(|c: char| !is_path_char(c)) {
            let token = token.trim_end_matches(['.', '-']);
            if ROOTS.iter().any(|root| token.starts_with(root)) && !token.contains("NAME") {
                paths.push(token.to_string());
            }
        }
    }
    paths
}

#[test]
fn every_path_the_pages_name_exists() {
    let mut named = 0;
    for page in ["README.md", "CONTRIBUTING.md", "docs/architecture.md"] {
        let text = std::fs::read_to_string(root().join(page)).expect("the page");
        for path in named_paths(&text) {
            assert!(
                root().join(&path).exists(),
                "{page} names {path}, which the tree does not have"
            );
            named += 1;
        }
    }
    assert!(named >= 20, "{named} paths named");
    assert_eq!(
        named_paths(
            "See src/shape.rs. And `shaders/NAME.wgsl`, (tests/all/)\n```sh\nsrc/x.rs\n```"
        ),
        ["src/shape.rs", "tests/all/"]
    );
}
