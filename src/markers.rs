//! The marker tables: data in `markers/markers.jsonl`, one marker a line, each
//! with its class, how it matches and its source. Compiled once into a single
//! case-insensitive Aho-Corasick automaton, so scanning costs one pass over the
//! text however many markers there are.
//!
//! Match kinds:
//! - `substring`: the marker anywhere, any case.
//! - `word`: as `substring`, but where the marker starts (ends) with a letter,
//!   digit or `_`, the text before (after) it must not be one: `429` does not
//!   match inside `14290`, `test failed` does not match `latest failed`.
//! - `code`: equals the structured `error-type` or `error-code` (any case).
//! - `http`: equals the structured HTTP status.
//! - `exit`: equals the exit code; read only where the text says nothing.
//!
//! A `weak` marker decides only when no other marker or fact does.

use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::model::FailureClass;

/// The tables as shipped.
pub const MARKERS_JSONL: &str = include_str!("../markers/markers.jsonl");

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkerMatch {
    Substring,
    Word,
    Code,
    Http,
    Exit,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Marker {
    pub class: FailureClass,
    pub marker: String,
    #[serde(rename = "match")]
    pub kind: MarkerMatch,
    pub source: String,
    #[serde(default)]
    pub weak: bool,
}

/// The compiled tables.
pub struct Tables {
    pub markers: Vec<Marker>,
    /// Indexes into `markers` of the text markers, in automaton pattern order.
    text_index: Vec<usize>,
    automaton: AhoCorasick,
    pub digest: String,
}

/// A text marker found in a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    /// Index into `Tables::markers`.
    pub marker: usize,
    /// Byte offset of the match in the scanned text.
    pub start: usize,
    pub end: usize,
}

/// Parses the shipped tables. Errors name the line and the problem.
pub fn parse(jsonl: &str) -> Result<Vec<Marker>, String> {
    let mut out: Vec<Marker> = Vec::new();
    for (n, line) in jsonl.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let m: Marker = serde_json::from_str(line).map_err(|e| format!("markers line {}: {e}", n + 1))?;
        if m.marker.is_empty() || m.marker != m.marker.to_ascii_lowercase() || m.marker.trim() != m.marker {
            return Err(format!("markers line {}: marker must be non-empty, lower-case and trimmed: {:?}", n + 1, m.marker));
        }
        if m.source.trim().is_empty() {
            return Err(format!("markers line {}: marker {:?} has no source", n + 1, m.marker));
        }
        if m.class == FailureClass::Indeterminate {
            return Err(format!("markers line {}: a marker cannot decide indeterminate", n + 1));
        }
        if out.iter().any(|o| o.marker == m.marker && o.kind == m.kind) {
            return Err(format!("markers line {}: duplicate marker {:?}", n + 1, m.marker));
        }
        out.push(m);
    }
    Ok(out)
}

impl Tables {
    pub fn build(markers: Vec<Marker>, source_text: &str) -> Tables {
        let text_index: Vec<usize> = markers
            .iter()
            .enumerate()
            .filter(|(_, m)| matches!(m.kind, MarkerMatch::Substring | MarkerMatch::Word))
            .map(|(i, _)| i)
            .collect();
        let automaton = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(text_index.iter().map(|&i| markers[i].marker.as_bytes()))
            .expect("marker automaton builds");
        let digest = hex(&Sha256::digest(source_text.as_bytes()));
        Tables { markers, text_index, automaton, digest }
    }

    /// Every text marker in `text`, in order of position (overlapping matches included).
    pub fn scan(&self, text: &str) -> Vec<Hit> {
        let bytes = text.as_bytes();
        let mut hits = Vec::new();
        for m in self.automaton.find_overlapping_iter(text) {
            let idx = self.text_index[m.pattern().as_usize()];
            let marker = &self.markers[idx];
            if marker.kind == MarkerMatch::Word && !word_bounded(bytes, m.start(), m.end(), marker.marker.as_bytes()) {
                continue;
            }
            hits.push(Hit { marker: idx, start: m.start(), end: m.end() });
        }
        hits
    }

    /// The marker of `kind` equal to `value` (case-insensitive, trimmed).
    pub fn lookup(&self, kind: MarkerMatch, value: &str) -> Option<usize> {
        let v = value.trim();
        self.markers.iter().position(|m| m.kind == kind && m.marker.eq_ignore_ascii_case(v))
    }
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn word_bounded(text: &[u8], start: usize, end: usize, marker: &[u8]) -> bool {
    let first = marker.first().copied().unwrap_or(b' ');
    let last = marker.last().copied().unwrap_or(b' ');
    if is_word(first) && start > 0 && is_word(text[start - 1]) {
        return false;
    }
    if is_word(last) && end < text.len() && is_word(text[end]) {
        return false;
    }
    true
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The shipped tables, compiled on first use.
pub fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| {
        let markers = parse(MARKERS_JSONL).expect("shipped marker tables parse (checked by tests)");
        Tables::build(markers, MARKERS_JSONL)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_tables_parse_and_every_entry_has_a_source() {
        let m = parse(MARKERS_JSONL).unwrap();
        assert!(m.len() > 50);
        assert!(m.iter().all(|m| !m.source.is_empty()));
    }

    #[test]
    fn word_markers_do_not_fire_inside_words() {
        let t = tables();
        let names = |text: &str| -> Vec<String> { t.scan(text).iter().map(|h| t.markers[h.marker].marker.clone()).collect() };
        assert!(names("the latest failed run").iter().all(|m| m != "test failed"));
        assert!(names("2 tests failed").iter().any(|m| m == "tests failed"));
        assert!(names("read ECONNRESET").iter().any(|m| m == "econnreset"));
        assert!(names("pipeline recipe").is_empty());
    }

    #[test]
    fn duplicate_and_uppercase_markers_are_rejected() {
        let dup = "{\"class\":\"work\",\"marker\":\"x\",\"match\":\"word\",\"source\":\"s\"}\n".repeat(2);
        assert!(parse(&dup).unwrap_err().contains("duplicate"));
        let upper = "{\"class\":\"work\",\"marker\":\"X\",\"match\":\"word\",\"source\":\"s\"}";
        assert!(parse(upper).unwrap_err().contains("lower-case"));
        let nosrc = "{\"class\":\"work\",\"marker\":\"x\",\"match\":\"word\",\"source\":\" \"}";
        assert!(parse(nosrc).unwrap_err().contains("no source"));
    }
}
