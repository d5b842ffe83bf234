//! The core's structure, checked from its source: no two modules of `src/`
//! import each other, no decider imports another decider, and no function
//! outside the tests is longer than a reader can hold in mind (80 lines).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The modules that decide one situation each.
const DECIDERS: [&str; 4] = ["transport", "breaker", "limits", "resume"];
const MAX_FUNCTION_LINES: usize = 80;

/// Each module's source up to its tests, by module name.
fn modules() -> BTreeMap<String, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or("").to_string();
            out.insert(path.file_stem().unwrap().to_string_lossy().into_owned(), code);
        }
    }
    out
}

/// The modules of the crate that `code` names in `use crate::...` or `crate::x::`.
fn imports(code: &str, names: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        let mut named = vec![rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or("")];
        // `use crate::{a, b::c}`
        if let Some(group) = rest.strip_prefix('{') {
            let group = group.split('}').next().unwrap_or("");
            named = group.split(',').map(|p| p.trim().split("::").next().unwrap_or("").trim()).collect();
        }
        out.extend(named.into_iter().filter(|n| names.contains(*n)).map(str::to_string));
    }
    out
}

#[test]
fn no_two_modules_import_each_other_and_no_decider_imports_a_decider() {
    let mods = modules();
    let names: BTreeSet<String> = mods.keys().cloned().collect();
    let graph: BTreeMap<String, BTreeSet<String>> = mods.iter().map(|(n, c)| (n.clone(), imports(c, &names))).collect();
    assert!(graph["resume"].contains("classify"), "the import reader finds nothing: {graph:?}");
    let mut faults = Vec::new();
    for (a, uses) in &graph {
        for b in uses {
            if b != a && graph.get(b).is_some_and(|back| back.contains(a)) && a < b {
                faults.push(format!("{a} and {b} import each other"));
            }
            if DECIDERS.contains(&a.as_str()) && DECIDERS.contains(&b.as_str()) && b != a {
                faults.push(format!("decider {a} imports decider {b}"));
            }
        }
    }
    assert!(faults.is_empty(), "{}", faults.join("\n"));
}

/// The functions of `code` longer than the limit: from a line that opens a
/// `fn` to the line that closes it at the same indentation.
fn long_functions(module: &str, code: &str) -> Vec<String> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        let is_fn = ["fn ", "pub fn ", "pub(crate) fn ", "const fn "].iter().any(|p| t.starts_with(p));
        if !is_fn || line.trim_end().ends_with(';') {
            continue;
        }
        let indent = line.len() - t.len();
        let close = " ".repeat(indent) + "}";
        if let Some(len) = lines[i + 1..].iter().position(|l| l.trim_end() == close) {
            if len + 2 > MAX_FUNCTION_LINES {
                out.push(format!("{module}.rs:{}: {} lines: {}", i + 1, len + 2, t));
            }
        }
    }
    out
}

#[test]
fn no_function_is_longer_than_80_lines() {
    let mods = modules();
    let long: Vec<String> = mods.iter().flat_map(|(m, c)| long_functions(m, c)).collect();
    assert!(long.is_empty(), "{}", long.join("\n"));
    // The measure itself finds a long function.
    let body = format!("fn big() {{\n{}}}\n", "    x();\n".repeat(MAX_FUNCTION_LINES));
    assert_eq!(long_functions("probe", &body).len(), 1);
}
