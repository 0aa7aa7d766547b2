//! Every name of the design is spelled once: each string constant of
//! `ichor_renderers::contract` appears as a quoted literal in no other non-test Rust file of the
//! workspace. A second spelling would drift from the first the day one of them changes.
//!
//! Read: every `.rs` file under the workspace root except tests (`tests/` folders, `tests.rs`,
//! `*_tests.rs`, everything after a `#[cfg(test)]` line), the test kit (`hack/testkit`), the
//! fuzz targets (`fuzz/`), comment lines, and `ichor-graph` (below `ichor-renderers` in the
//! dependency rule, so it cannot name the contract; its `Ownership` default is the engine's own).
//! `#[kube(group = "…")]` attributes take a literal; a unit test of the contract checks them.

use std::fs;
use std::path::{Path, PathBuf};

/// The contract module, relative to the workspace root.
const CONTRACT: &str = "renderers/src/contract.rs";

/// Values too generic to search for: they are also Talos's version, a binary, a chart, a
/// provider id, ….
const GENERIC: &[&str] = &[
    "v1alpha1",
    "ichor",
    "ui",
    "issuer",
    "entry",
    "legacy",
    "migrating",
    "returning",
    // Also a value of `issuer_load control-plane --layout`.
    "per-user",
];

/// Folders (relative to the root) whose files are not read.
const SKIPPED_DIRS: &[&str] = &[
    "target",
    ".git",
    ".build",
    "node_modules",
    "ui",
    "hack/testkit",
    "fuzz",
    "graph",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the golden crate sits in the workspace")
        .to_path_buf()
}

/// `(constant, value)` of every `pub const NAME: &str = "value";` of the contract module.
fn contract_constants(text: &str) -> Vec<(String, String)> {
    text.lines()
        .take_while(|l| !l.trim_start().starts_with("#[cfg(test)]"))
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("pub const ")?;
            let (name, rest) = rest.split_once(": &str = \"")?;
            let value = rest.strip_suffix("\";")?;
            Some((name.to_owned(), value.to_owned()))
        })
        .collect()
}

fn is_test_file(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    name == "tests.rs" || name.ends_with("_tests.rs") || path.components().any(|c| c.as_os_str() == "tests")
}

fn rust_files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let relative = path.strip_prefix(root).unwrap();
        if path.is_dir() {
            if !SKIPPED_DIRS.iter().any(|s| relative == Path::new(s)) {
                rust_files(root, &path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") && !is_test_file(relative) {
            out.push(path);
        }
    }
}

/// Every place outside the contract module where a contract value is quoted, as
/// `file:line: message`.
fn second_spellings(root: &Path) -> Vec<String> {
    let constants = contract_constants(&fs::read_to_string(root.join(CONTRACT)).unwrap());
    assert!(
        constants.len() > 20,
        "the contract module's constants were not found in {CONTRACT}"
    );
    // Each searched value once, with the constants that hold it.
    let mut values: Vec<(&str, Vec<&str>)> = Vec::new();
    for (name, value) in constants.iter().filter(|(_, v)| !GENERIC.contains(&v.as_str())) {
        match values.iter_mut().find(|(v, _)| v == value) {
            Some((_, names)) => names.push(name),
            None => values.push((value, vec![name])),
        }
    }
    let mut files = Vec::new();
    rust_files(root, root, &mut files);
    files.sort();
    let mut found = Vec::new();
    for path in files {
        let relative = path.strip_prefix(root).unwrap();
        if relative == Path::new(CONTRACT) {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        let skipped = test_items(&text);
        for (number, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if skipped.contains(&number) || code.starts_with("//") || code.starts_with("group = \"") {
                continue;
            }
            for (value, names) in &values {
                if line.contains(&format!("\"{value}\"")) {
                    found.push(format!(
                        "{}:{}: \"{value}\" is a contract name; use ichor_renderers::contract::{} instead",
                        relative.display(),
                        number + 1,
                        names.join(" or contract::"),
                    ));
                }
            }
        }
    }
    found
}

/// The line numbers (from 0) of the items marked `#[cfg(test)]` in `text`: the attribute, any
/// further attributes, and the item to its `;` or its closing brace. Only those are skipped, so
/// a `#[cfg(test)] mod tests;` near the top of a file leaves the rest of it searched.
fn test_items(text: &str) -> std::collections::BTreeSet<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut skipped = std::collections::BTreeSet::new();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].trim_start().starts_with("#[cfg(test)]") {
            i += 1;
            continue;
        }
        skipped.insert(i);
        i += 1;
        while i < lines.len() && lines[i].trim_start().starts_with("#[") {
            skipped.insert(i);
            i += 1;
        }
        let mut depth = 0i64;
        let mut opened = false;
        while i < lines.len() {
            skipped.insert(i);
            for c in lines[i].chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            let line = lines[i].trim_end();
            i += 1;
            if (opened && depth <= 0) || (!opened && line.ends_with(';')) {
                break;
            }
        }
    }
    skipped
}

#[test]
fn only_the_items_marked_for_tests_are_skipped() {
    let text = "use a;\n#[cfg(test)]\nmod tests;\nconst X: &str = \"x\";\n#[cfg(test)]\n#[allow(x)]\nmod more {\n    fn f() { g(); }\n}\nconst Y: &str = \"y\";\n";
    let skipped: Vec<usize> = test_items(text).into_iter().collect();
    assert_eq!(skipped, [1, 2, 4, 5, 6, 7, 8]);
}

#[test]
fn contract_names_are_defined_once() {
    let found = second_spellings(&root());
    assert!(
        found.is_empty(),
        "contract names spelled outside {CONTRACT}:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_constants_of_the_contract_are_read() {
    let constants = contract_constants(
        "pub const A: &str = \"a-b\";\n  pub const B: &str = \"c\";\nconst C: &str = \"d\";\n#[cfg(test)]\npub const D: &str = \"e\";\n",
    );
    assert_eq!(
        constants,
        [
            ("A".to_owned(), "a-b".to_owned()),
            ("B".to_owned(), "c".to_owned())
        ]
    );
}
