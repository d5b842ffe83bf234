//! Builds the shipped marker tables into the crate, so that nothing is parsed
//! or built when they are first used:
//!
//! - `shipped.rs`: every entry of `markers/markers.jsonl` as a `Marker`
//!   literal without its `source` (the sources stay in the repository and in
//!   `MARKERS_JSONL` for the tests; the component only matches), the index
//!   of the text markers, and the tables of their automaton, built by
//!   `src/automaton.rs` (included here as it is in the crate). A text
//!   marker's text is a span of the automaton's literal bytes, cut at compile
//!   time, so the component holds those bytes once;
//! - `markers.sha256`: the SHA-256 of the full file, which `info()` reports
//!   as the tables' digest.
//!
//! A line that does not parse stops the build naming it; the rules every
//! entry must keep are checked by the crate's tests (`markers::parse`), which
//! also compare these literals with the parsed file.

#[path = "src/automaton.rs"]
#[allow(dead_code)]
mod automaton;
#[path = "src/patterns.rs"]
#[allow(dead_code)]
mod patterns;
#[path = "src/statusforms.rs"]
mod statusforms;
#[path = "src/words.rs"]
mod words;

use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let path = root.join("markers").join("markers.jsonl");
    println!("cargo:rerun-if-changed={}", path.display());
    println!("cargo:rerun-if-changed=src/automaton.rs");
    println!("cargo:rerun-if-changed=src/words.rs");
    println!("cargo:rerun-if-changed=src/patterns.rs");
    println!("cargo:rerun-if-changed=src/statusforms.rs");
    let full = std::fs::read_to_string(&path).expect("markers/markers.jsonl is readable");
    let entries = entries(&full);
    let mut out = String::new();
    write_markers(&mut out, &entries);
    write_automaton(&mut out, &entries);
    let dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    std::fs::write(dir.join("shipped.rs"), out).unwrap();
    std::fs::write(dir.join("weights.rs"), weights(&root)).unwrap();
    let digest: String = Sha256::digest(full.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    std::fs::write(dir.join("markers.sha256"), digest).unwrap();
}

/// The entries of the written tables, each `shape` and `unless` with its
/// named patterns expanded (`src/patterns.rs`) and each status form as the
/// entries it stands for (`src/statusforms.rs`); the patterns' own lines are
/// not entries.
fn entries(full: &str) -> Vec<Map<String, Value>> {
    let mut named: Vec<(String, String)> = Vec::new();
    let mut out = Vec::new();
    for (n, line) in full.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let Ok(Value::Object(mut e)) = serde_json::from_str(line) else {
            panic!("markers/markers.jsonl line {}: not a JSON object", n + 1)
        };
        if let Some(name) = text(&e, "pattern") {
            let regex = text(&e, "regex").unwrap_or_else(|| panic!("markers/markers.jsonl line {}: no regex", n + 1));
            named.push((name, regex));
            continue;
        }
        if e.contains_key(statusforms::KEY) {
            let table: Vec<statusforms::Status> = out.iter().filter_map(status).collect();
            let expanded = statusforms::expand(&e, &table)
                .unwrap_or_else(|rule| panic!("markers/markers.jsonl line {}: {rule}", n + 1));
            out.extend(expanded);
            continue;
        }
        for key in ["shape", "unless"] {
            if let Some(expr) = text(&e, key) {
                let expanded = patterns::expand(&expr, &named)
                    .unwrap_or_else(|rule| panic!("markers/markers.jsonl line {}: {rule}", n + 1));
                e.insert(key.to_string(), Value::String(expanded));
            }
        }
        out.push(e);
    }
    out
}

/// An `http` entry as a row of the status table.
fn status(e: &Map<String, Value>) -> Option<statusforms::Status> {
    (text(e, "match").as_deref() == Some("http")).then(|| statusforms::Status {
        code: text(e, "marker").unwrap_or_default(),
        class: text(e, "class").unwrap_or_default(),
        status: flag(e, "status"),
        generic: flag(e, "generic"),
    })
}

fn text(e: &Map<String, Value>, key: &str) -> Option<String> {
    e.get(key).and_then(Value::as_str).map(str::to_string)
}

fn flag(e: &Map<String, Value>, key: &str) -> bool {
    e.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// The classes in the order of the weights' columns (`weigh.rs` reads them so).
const CLASSES: [&str; 5] = ["transient_transport", "environmental", "work", "usage_limit", "indeterminate"];
/// The labelled texts the weights are learned from: the dev corpus and the
/// working half. Never the held-back half: it is what the weights are measured on.
const TRAINING: [&str; 2] = ["dev.jsonl", "working.jsonl"];
/// A word is weighed when at least this many training texts hold it. Five-fold
/// cross-validation on the training texts, split by repository, scores 4, 5
/// and 6 alike (on the 4,567 texts of twenty-one batches, scored on the 927
/// that no marker, fact or exit code decides, six shuffles of the
/// repositories into folds: 3,894, 3,910 and 3,899 right of 5,562, 8 3,874;
/// earlier, on 1,869 texts, 2, 3 and 4 alike). 6 keeps about 670 fewer words
/// than 4, about 10 KB of the component, which the markers need.
const MIN_TEXTS: usize = 6;
/// The weights' resolution: steps of 1/32 of a natural log unit.
const WEIGH_STEPS: f32 = 32.0;

/// Multinomial naive Bayes over the words of each labelled text (its set of
/// words, `words.rs`): the words in at least `MIN_TEXTS` texts, and for
/// each its log-probability in each class with add-one smoothing; the log
/// prior of each class.
fn weights(root: &std::path::Path) -> String {
    let mut rows: Vec<(usize, Vec<String>)> = Vec::new();
    for name in TRAINING {
        let path = root.join("tests").join("corpus").join(name);
        println!("cargo:rerun-if-changed={}", path.display());
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let row: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{name} line {}: {e}", n + 1));
            let label = row["expected"].as_str().unwrap_or_default();
            let class = CLASSES
                .iter()
                .position(|c| *c == label)
                .unwrap_or_else(|| panic!("{name} line {}: class {label:?}", n + 1));
            rows.push((class, words::words(row["evidence"].as_str().unwrap_or_default())));
        }
    }
    let mut df: std::collections::BTreeMap<&str, usize> = Default::default();
    for (_, ws) in &rows {
        for w in ws {
            *df.entry(w).or_default() += 1;
        }
    }
    let vocab: Vec<&str> = df.iter().filter(|(_, &n)| n >= MIN_TEXTS).map(|(w, _)| *w).collect();
    let index: std::collections::HashMap<&str, usize> = vocab.iter().enumerate().map(|(i, w)| (*w, i)).collect();
    let mut counts = vec![[0usize; 5]; vocab.len()];
    let (mut totals, mut per_class) = ([0usize; 5], [0usize; 5]);
    for (class, ws) in &rows {
        per_class[*class] += 1;
        for i in ws.iter().filter_map(|w| index.get(w.as_str())) {
            counts[*i][*class] += 1;
            totals[*class] += 1;
        }
    }
    let log = |x: f64| x.ln() as f32;
    let mut out = String::new();
    let prior: Vec<f32> =
        per_class.iter().map(|&n| if n == 0 { f32::MIN } else { log(n as f64 / rows.len() as f64) }).collect();
    writeln!(out, "pub(super) const WEIGH_TEXTS: usize = {};", rows.len()).unwrap();
    writeln!(out, "pub(super) static WEIGH_PRIOR: [f32; 5] = {prior:?};").unwrap();
    // The words as one text and their ends (binary-searched).
    let ends: Vec<usize> = vocab.iter().scan(0, |end, w| Some(*end + w.len()).inspect(|e| *end = *e)).collect();
    assert!(ends.last().is_none_or(|&e| e <= u16::MAX as usize), "the weighed words fit u16 offsets");
    writeln!(out, "pub(super) static WEIGH_TEXT: &str = {:?};", vocab.concat()).unwrap();
    array(&mut out, "WEIGH_ENDS", "u16", &ends);
    // Each weight is one byte: how many steps of 1/WEIGH_STEPS of a natural
    // log unit it lies below its class's largest weight (a quarter of the
    // bytes of `f32`s; the rounding is at most 1/64 of a unit a word).
    let lp = |c: &[usize; 5], k: usize| (c[k] as f64 + 1.0).ln() - (totals[k] as f64 + vocab.len() as f64).ln();
    let top: Vec<f64> = (0..5).map(|k| counts.iter().map(|c| lp(c, k)).fold(f64::MIN, f64::max)).collect();
    writeln!(out, "pub(super) const WEIGH_STEPS: f32 = {WEIGH_STEPS:?};").unwrap();
    writeln!(out, "pub(super) static WEIGH_TOP: [f32; 5] = {:?};", top.iter().map(|&t| t as f32).collect::<Vec<_>>())
        .unwrap();
    writeln!(out, "pub(super) static WEIGH_Q: [[u8; 5]; {}] = [", vocab.len()).unwrap();
    for c in &counts {
        let q: Vec<u8> = (0..5)
            .map(|k| {
                let steps = ((top[k] - lp(c, k)) * WEIGH_STEPS as f64).round();
                assert!(
                    (0.0..=255.0).contains(&steps),
                    "a weight {steps} steps below its class's largest: over a byte"
                );
                steps as u8
            })
            .collect();
        writeln!(out, "    {q:?},").unwrap();
    }
    writeln!(out, "];").unwrap();
    out
}

/// `transient_transport` -> `TransientTransport`.
fn variant(name: &str) -> String {
    name.split('_').map(|w| w[..1].to_ascii_uppercase() + &w[1..]).collect()
}

fn is_text(e: &Map<String, Value>) -> bool {
    matches!(text(e, "match").as_deref(), Some("substring" | "word" | "line"))
}

/// The shipped markers, packed: each is a `Packed` (`src/markers.rs`, 12
/// bytes against a `Marker`'s 56 in wasm32) that the shipped tables read in
/// place (`Tables::marker` unpacks one when asked). A marker's text is a span of `TEXT`: a text marker without
/// `#` is its automaton literal, and `TEXT` begins with the literals
/// (write_automaton reads them from there), so those bytes are stored once;
/// the other markers' texts follow. Shapes are indexes into `SHIPPED_SHAPES`
/// (0 for none), the six flags bits.
fn write_markers(out: &mut String, entries: &[Map<String, Value>]) {
    let pieces: Vec<String> = entries.iter().filter(|e| is_text(e)).map(anchor_piece).collect();
    let mut all: String = pieces.concat();
    let literal_len = all.len();
    let mut shapes: Vec<String> = Vec::new();
    let mut shape_index = |v: Option<String>| -> usize {
        v.map_or(0, |v| match shapes.iter().position(|s| *s == v) {
            Some(i) => i + 1,
            None => {
                shapes.push(v);
                shapes.len()
            }
        })
    };
    let mut offset = 0usize;
    let mut packed = Vec::new();
    for e in entries {
        let class = variant(&text(e, "class").expect("every marker has a class"));
        let kind = variant(&text(e, "match").expect("every marker has a match kind"));
        let marker = text(e, "marker").expect("every marker has a marker");
        // A text marker's anchor is the next span of the literals.
        let piece = if is_text(e) { anchor_piece(e).len() } else { 0 };
        offset += piece;
        let span = if is_text(e) && piece == marker.len() {
            (offset - piece, offset)
        } else {
            all.push_str(&marker);
            (all.len() - marker.len(), all.len())
        };
        assert_eq!(&all[span.0..span.1], marker, "a marker's span holds its text");
        let flags = ["weak", "generic", "throttle", "status", "near", "frame"]
            .iter()
            .enumerate()
            .fold(0u8, |f, (bit, key)| f | (u8::from(flag(e, key)) << bit));
        let (shape, unless) = (shape_index(text(e, "shape")), shape_index(text(e, "unless")));
        let len = u8::try_from(span.1 - span.0).expect("a shipped marker is shorter than 256 bytes");
        packed.push(format!(
            "    Packed {{ start: {}, len: {len}, shape: {shape}, unless: {unless}, class: FailureClass::{class}, \
             kind: MarkerMatch::{kind}, flags: {flags} }},",
            span.0
        ));
    }
    assert_eq!(offset, literal_len, "the literals come first");
    assert!(all.len() <= u32::MAX as usize, "spans fit u32");
    assert!(shapes.len() < u16::MAX as usize, "shape indexes fit u16");
    writeln!(out, "const TEXT: &str = {all:?};").unwrap();
    writeln!(out, "const LITERAL_LEN: usize = {literal_len};").unwrap();
    writeln!(out, "pub(super) static SHIPPED_TEXT: &str = TEXT;").unwrap();
    writeln!(out, "pub(super) static SHIPPED_SHAPES: [&str; {}] = {shapes:?};", shapes.len()).unwrap();
    writeln!(out, "pub(super) static SHIPPED_PACKED: [Packed; {}] = [", packed.len()).unwrap();
    for line in packed {
        writeln!(out, "{line}").unwrap();
    }
    writeln!(out, "];").unwrap();
    let index: Vec<usize> = (0..entries.len()).filter(|&i| is_text(&entries[i])).collect();
    array(out, "SHIPPED_TEXT_INDEX", "u16", &index);
    // The text markers with a shape or an unless, by literal (`Tables::shaped`).
    let shaped: Vec<usize> = (0..index.len())
        .filter(|&p| ["shape", "unless"].iter().any(|key| text(&entries[index[p]], key).is_some()))
        .collect();
    array(out, "SHIPPED_SHAPED", "u16", &shaped);
}

/// The bytes of a text marker that the automaton looks for.
fn anchor_piece(e: &Map<String, Value>) -> String {
    automaton::anchor(&text(e, "marker").expect("every marker has a marker")).1.to_string()
}

fn write_automaton(out: &mut String, entries: &[Map<String, Value>]) {
    let markers: Vec<String> = entries.iter().filter(|e| is_text(e)).map(|e| text(e, "marker").unwrap()).collect();
    let literals: Vec<&[u8]> = markers.iter().map(|m| automaton::anchor(m).1.as_bytes()).collect();
    let a = automaton::build(&literals).expect("the shipped automaton builds");
    array(out, "SHIPPED_CLASSES", "u8", &a.classes[..]);
    match &a.trans {
        automaton::Trans::Narrow(t) => {
            array(out, "SHIPPED_TRANS", "u16", t);
            writeln!(out, "pub(super) const SHIPPED_TRANS_KIND: fn(&'static [u16]) -> Trans = |t| Trans::Narrow(Cow::Borrowed(t));").unwrap();
        }
        automaton::Trans::Wide(t) => {
            array(out, "SHIPPED_TRANS", "u32", t);
            writeln!(
                out,
                "pub(super) const SHIPPED_TRANS_KIND: fn(&'static [u32]) -> Trans = |t| Trans::Wide(Cow::Borrowed(t));"
            )
            .unwrap();
        }
    }
    array(out, "SHIPPED_MATCH_ENDS", "u16", &a.match_ends);
    array(out, "SHIPPED_VERIFY", "u16", &a.verify);
    array(out, "SHIPPED_VERIFY_NEXT", "u8", &a.verify_next);
    array(out, "SHIPPED_FOLLOW", "u16", &a.follow);
    array(out, "SHIPPED_FOLLOW_MASKS", "u64", &a.follow_masks);
    array(out, "SHIPPED_RESUME", "u16", &a.resume);
    array(out, "SHIPPED_LITERAL_ENDS", "u16", &a.literal_ends);
    array(out, "SHIPPED_LITERAL_WRAPS", "u32", &a.literal_wraps);
    // The literals are the first bytes of the markers' text (write_markers).
    assert_eq!(a.literal_bytes[..], literals.concat()[..], "the automaton's literals are the anchors in order");
    writeln!(out, "pub(super) static SHIPPED_LITERALS: &[u8] = TEXT.as_bytes().split_at(LITERAL_LEN).0;").unwrap();
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
