//! Builds the shipped marker tables into the crate, so that nothing is parsed
//! or built when they are first used:
//!
//! - `shipped.rs`: every entry of `markers/markers.jsonl` as a `Marker`
//!   literal without its `source` (the sources stay in the repository and in
//!   `MARKERS_JSONL` for the tests; the component only matches), the index
//!   of the text markers, and the tables of their automaton, built by
//!   `src/automaton.rs` (included here as it is in the crate);
//! - `markers.sha256`: the SHA-256 of the full file, which `info()` reports
//!   as the tables' digest.
//!
//! A line that does not parse stops the build naming it; the rules every
//! entry must keep are checked by the crate's tests (`markers::parse`), which
//! also compare these literals with the parsed file.

#[path = "src/automaton.rs"]
#[allow(dead_code)]
mod automaton;

use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let path = root.join("markers").join("markers.jsonl");
    println!("cargo:rerun-if-changed={}", path.display());
    println!("cargo:rerun-if-changed=src/automaton.rs");
    let full = std::fs::read_to_string(&path).expect("markers/markers.jsonl is readable");
    let entries: Vec<Map<String, Value>> = full
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| match serde_json::from_str(l) {
            Ok(Value::Object(m)) => m,
            _ => panic!("markers/markers.jsonl line {}: not a JSON object", n + 1),
        })
        .collect();
    let mut out = String::new();
    write_markers(&mut out, &entries);
    write_automaton(&mut out, &entries);
    let dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    std::fs::write(dir.join("shipped.rs"), out).unwrap();
    let digest: String = Sha256::digest(full.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    std::fs::write(dir.join("markers.sha256"), digest).unwrap();
}

fn text(e: &Map<String, Value>, key: &str) -> Option<String> {
    e.get(key).and_then(Value::as_str).map(str::to_string)
}

fn flag(e: &Map<String, Value>, key: &str) -> bool {
    e.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// `transient_transport` -> `TransientTransport`.
fn variant(name: &str) -> String {
    name.split('_').map(|w| w[..1].to_ascii_uppercase() + &w[1..]).collect()
}

fn is_text(e: &Map<String, Value>) -> bool {
    matches!(text(e, "match").as_deref(), Some("substring" | "word" | "line"))
}

fn write_markers(out: &mut String, entries: &[Map<String, Value>]) {
    let opt = |v: Option<String>| v.map_or("None".to_string(), |s| format!("Some(Cow::Borrowed({s:?}))"));
    writeln!(out, "pub(super) static SHIPPED_MARKERS: [Marker; {}] = [", entries.len()).unwrap();
    for e in entries {
        let class = variant(&text(e, "class").expect("every marker has a class"));
        let kind = variant(&text(e, "match").expect("every marker has a match kind"));
        let marker = text(e, "marker").expect("every marker has a marker");
        writeln!(
            out,
            "    Marker {{ class: FailureClass::{class}, marker: Cow::Borrowed({marker:?}), kind: MarkerMatch::{kind}, \
             source: Cow::Borrowed(\"\"), weak: {}, generic: {}, throttle: {}, status: {}, shape: {}, unless: {}, near: {} }},",
            flag(e, "weak"),
            flag(e, "generic"),
            flag(e, "throttle"),
            flag(e, "status"),
            opt(text(e, "shape")),
            opt(text(e, "unless")),
            flag(e, "near"),
        )
        .unwrap();
    }
    writeln!(out, "];").unwrap();
    let index: Vec<usize> = (0..entries.len()).filter(|&i| is_text(&entries[i])).collect();
    array(out, "SHIPPED_TEXT_INDEX", "u16", &index);
}

fn write_automaton(out: &mut String, entries: &[Map<String, Value>]) {
    let markers: Vec<String> = entries.iter().filter(|e| is_text(e)).map(|e| text(e, "marker").unwrap()).collect();
    let literals: Vec<&[u8]> = markers.iter().map(|m| automaton::anchor(m).1.as_bytes()).collect();
    let a = automaton::build(&literals).expect("the shipped automaton builds");
    array(out, "SHIPPED_CLASSES", "u8", &a.classes[..]);
    array(out, "SHIPPED_TRANS", "u32", &a.trans);
    array(out, "SHIPPED_MATCH_ENDS", "u32", &a.match_ends);
    array(out, "SHIPPED_VERIFY", "u16", &a.verify);
    array(out, "SHIPPED_LITERAL_ENDS", "u32", &a.literal_ends);
    array(out, "SHIPPED_LITERALS", "u8", &a.literal_bytes);
    writeln!(out, "pub(super) const SHIPPED_STRIDE: usize = {};", a.stride).unwrap();
    writeln!(out, "pub(super) const SHIPPED_START: u32 = {};", a.start).unwrap();
    writeln!(out, "pub(super) const SHIPPED_FIRST_MATCH: u32 = {};", a.first_match).unwrap();
}

fn array<T: std::fmt::Display>(out: &mut String, name: &str, ty: &str, values: &[T]) {
    write!(out, "pub(super) static {name}: [{ty}; {}] = [", values.len()).unwrap();
    for (i, v) in values.iter().enumerate() {
        if i % 32 == 0 {
            out.push('\n');
        }
        write!(out, "{v},").unwrap();
    }
    writeln!(out, "\n];").unwrap();
}
