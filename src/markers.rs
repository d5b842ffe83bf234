//! The marker tables: data in `markers/markers.jsonl`, one marker a line, each
//! with its class, how it matches and its source. `build.rs` compiles them
//! into the crate: the entries as literals and the automaton of their text
//! markers as flat tables (`automaton.rs`), so the first call parses and
//! builds nothing, and scanning costs one pass over the text however many
//! markers there are. An operator's markers are compiled the same way at run
//! time, once per list.
//!
//! Match kinds:
//! - `substring`: the marker anywhere, any case.
//! - `word`: as `substring`, but where the marker starts (ends) with a letter,
//!   digit or `_`, the text before (after) it must not be one: `429` does not
//!   match inside `14290`, `test failed` does not match `latest failed`.
//! - `code`: equals the structured `error-type` or `error-code` (any case).
//! - `http`: equals the structured HTTP status.
//! - `line`: as `word`, and the match opens its line (only blanks before it)
//!   and is written in capitals in the text, the way test runners print a
//!   verdict (`FAILED tests/x.py::t`, `FAIL src/a.test.js`, `--- FAIL: TestX`);
//!   `Failed to connect` at the start of a line is not a verdict.
//! - `code`: equals the structured `error-type` or `error-code` (any case).
//! - `http`: equals the structured HTTP status.
//! - `exit`: equals the exit code; read only where the text says nothing.
//!
//! In a text marker (`substring`, `word`, `line`) a `#` stands for a run of 1
//! to 20 ASCII digits: `found # errors` matches `Found 12 errors`, `error ts#:`
//! matches `error TS2304:`. The automaton holds the longest literal piece of
//! such a marker and the digits and other pieces are checked around each hit,
//! so the scan stays one pass and the check costs at most the marker's length.
//!
//! A `weak` marker decides only when no other marker or fact does.
//!
//! Shapes: a text marker may carry a `shape`, a regular expression (the
//! `regex-lite` crate's syntax: `\d`, `\w`, `\s` and `\b` are ASCII, there
//! are no Unicode classes) that must
//! match the marker's context, and an `unless`, one that must not. The
//! context is the line the marker stands on, or with `near` that line and up
//! to three lines on either side, each side at most 1024 bytes; it is read
//! ASCII-lower-cased, so the expressions are written in lower case. The
//! automaton finds the marker's literal first, so an expression runs only on
//! the few lines that hold it: the scan stays one pass over the text, and an
//! expression costs at most its context. `path:line:col: error` is the shape
//! `^\s*\S+:\d+(:\d+)?: error\b` behind the literal `: error`.
//!
//! A marker of class `indeterminate` is neutral: a text that looks like a
//! fault but identifies none (`mcp error -32000: connection closed`). It
//! hides the shorter markers inside it and decides nothing.
//!
//! A `generic` marker names a whole family of stops (`api error: 400` is any
//! malformed request): it never decides against a specific work or
//! environmental marker, and never gives the signal where a specific marker of
//! its own class is present, but it always outranks a retry and a usage-limit
//! wait: beside a transient or usage-limit marker, the answer is its class.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, OnceLock};

use regex_lite::{Regex, RegexBuilder};
use sha2::{Digest, Sha256};

use crate::automaton::{self, Automaton};
use crate::codeset::CodeSet;
use crate::model::FailureClass;
pub use crate::model::{Marker, MarkerMatch};

/// The tables as written, a source on every entry.
pub const MARKERS_JSONL: &str = include_str!("../markers/markers.jsonl");

/// The tables as compiled into the crate by `build.rs`: the same entries
/// without their sources, the index of the text markers and their
/// automaton; and the SHA-256 of `MARKERS_JSONL`.
mod shipped {
    use std::borrow::Cow;

    use super::Packed;
    use crate::automaton::Trans;
    use crate::model::{FailureClass, MarkerMatch};

    include!(concat!(env!("OUT_DIR"), "/shipped.rs"));
}

/// A shipped marker as `build.rs` packs it (12 bytes in wasm32, where a
/// `Marker` takes 56): its text as a span of `SHIPPED_TEXT` (where it
/// starts, and its length: every shipped marker is shorter than 256 bytes,
/// and a u32 end took 4 bytes more of each entry, 11.8 KB of the
/// component), its shape and
/// unless as indexes into `SHIPPED_SHAPES` counted from 1 (0: none), and its
/// flags as bits in `Marker`'s order (weak, generic, throttle, status, near,
/// frame). The tables read it in place and unpack one entry when it is
/// asked for (`Tables::marker`).
struct Packed {
    start: u32,
    shape: u16,
    unless: u16,
    len: u8,
    class: FailureClass,
    kind: MarkerMatch,
    flags: u8,
}

impl Packed {
    fn text(&self) -> &'static str {
        let start = self.start as usize;
        &shipped::SHIPPED_TEXT[start..start + self.len as usize]
    }

    /// Flag `bit` (0 weak, 1 generic, 2 throttle, 3 status, 4 near, 5 frame).
    fn flag(&self, bit: u8) -> bool {
        self.flags & (1 << bit) != 0
    }

    /// The marker, borrowing its texts from the shipped ones.
    fn unpack(&self) -> Marker {
        let shape = |i: u16| (i > 0).then(|| Cow::Borrowed(shipped::SHIPPED_SHAPES[i as usize - 1]));
        let flag = |bit: u8| self.flag(bit);
        Marker {
            class: self.class,
            marker: Cow::Borrowed(self.text()),
            kind: self.kind,
            source: Cow::Borrowed(""),
            weak: flag(0),
            generic: flag(1),
            throttle: flag(2),
            status: flag(3),
            shape: shape(self.shape),
            unless: shape(self.unless),
            near: flag(4),
            frame: flag(5),
        }
    }
}

const SHIPPED_DIGEST: &str = include_str!(concat!(env!("OUT_DIR"), "/markers.sha256"));

/// The bytes of context read on each side of a shaped marker.
const CONTEXT_BYTES: usize = 1024;
/// The lines of context on each side of a `near` marker.
const NEAR_LINES: usize = 3;

fn compile(source: &str) -> Result<Regex, regex_lite::Error> {
    RegexBuilder::new(source).size_limit(1 << 20).build()
}

/// A compiled `shape`: the codes a status phrase's digits may be
/// (`codeset.rs`), or a regular expression over the context.
enum Shape {
    Codes(CodeSet),
    Regex(Regex),
}

/// A text marker's `shape` and `unless`, each compiled when a hit first
/// needs it: most texts meet few shaped markers, so a fresh instance pays
/// only for the ones it meets.
type Compiled = (OnceLock<Box<Shape>>, OnceLock<Box<Regex>>);

/// Whether the context of the hit at `[start, end)` of `text` fits `m`'s
/// shape and unless. The context is read ASCII-lower-cased, and only when
/// an expression needs it.
fn fits(m: &Marker, slots: &Compiled, text: &str, start: usize, end: usize) -> bool {
    let ctx = OnceLock::new();
    let context = || -> &String {
        ctx.get_or_init(|| {
            let lines = if m.near { NEAR_LINES + 1 } else { 1 };
            text[around(text, start, lines, false)..around(text, end, lines, true)].to_ascii_lowercase()
        })
    };
    let regex = |source: &str| compile(source).expect("checked by parse");
    let shape = m.shape.as_deref().map(|s| {
        let made = || Box::new(CodeSet::parse(&m.marker, s).map_or_else(|| Shape::Regex(regex(s)), Shape::Codes));
        match slots.0.get_or_init(made).as_ref() {
            Shape::Codes(set) => set.fits(text, start, end),
            Shape::Regex(r) => r.is_match(context()),
        }
    });
    let unless = m.unless.as_deref().map(|s| slots.1.get_or_init(|| Box::new(regex(s))).is_match(context()));
    shape != Some(false) && unless != Some(true)
}

/// The offset `lines` line breaks before (after) `at`, at most `CONTEXT_BYTES`
/// away, on a character boundary.
fn around(text: &str, at: usize, lines: usize, forward: bool) -> usize {
    let bytes = text.as_bytes();
    let mut i = at;
    let mut seen = 0;
    if forward {
        let stop = (at + CONTEXT_BYTES).min(bytes.len());
        while i < stop {
            if bytes[i] == b'\n' {
                seen += 1;
                if seen == lines {
                    break;
                }
            }
            i += 1;
        }
        while !text.is_char_boundary(i) {
            i -= 1;
        }
    } else {
        let stop = at.saturating_sub(CONTEXT_BYTES);
        while i > stop {
            if bytes[i - 1] == b'\n' {
                seen += 1;
                if seen == lines {
                    break;
                }
            }
            i -= 1;
        }
        while !text.is_char_boundary(i) {
            i += 1;
        }
    }
    i
}

/// Whether a match kind is read from the text.
pub fn is_text(kind: MarkerMatch) -> bool {
    matches!(kind, MarkerMatch::Substring | MarkerMatch::Word | MarkerMatch::Line)
}

/// The most digits one `#` of a marker matches.
const MAX_DIGITS: usize = 20;

/// The whole match of a text marker around a hit of its anchor at
/// `[start, end)`, if the digit runs (`#`) and the other pieces are there.
fn extend(marker: &str, text: &[u8], start: usize, end: usize) -> Option<(usize, usize)> {
    if !marker.contains('#') {
        return Some((start, end));
    }
    let (anchor, _) = automaton::anchor(marker);
    let pieces: Vec<&str> = marker.split('#').collect();
    let mut s = start;
    for piece in pieces[..anchor].iter().rev() {
        let digits = text[..s].iter().rev().take(MAX_DIGITS + 1).take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 || digits > MAX_DIGITS {
            return None;
        }
        s -= digits;
        if s < piece.len() || !text[s - piece.len()..s].eq_ignore_ascii_case(piece.as_bytes()) {
            return None;
        }
        s -= piece.len();
    }
    let mut e = end;
    for piece in &pieces[anchor + 1..] {
        let digits = text[e..].iter().take(MAX_DIGITS + 1).take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 || digits > MAX_DIGITS {
            return None;
        }
        e += digits;
        if text.len() - e < piece.len() || !text[e..e + piece.len()].eq_ignore_ascii_case(piece.as_bytes()) {
            return None;
        }
        e += piece.len();
    }
    Some((s, e))
}

/// The compiled tables: the entries, the automaton of their text markers,
/// and the shapes compiled so far.
pub struct Tables {
    /// The entries: [`Tables::marker`] reads one.
    entries: Entries,
    /// Indexes into the entries of the text markers, in automaton literal order.
    text_index: Cow<'static, [u16]>,
    automaton: Automaton,
    /// The automaton literals of the text markers with a shape or an unless,
    /// ascending (for the shipped tables, listed by `build.rs`): only about
    /// one text marker in six has one.
    shaped: Cow<'static, [u16]>,
    /// The compiled shapes, a slot for each of `shaped` in its order, made
    /// at the first shaped hit. Finding the shaped markers at that hit
    /// (reading every entry) cost a fresh instance's first call about 16 µs
    /// in the component, and slots wide enough to hold a compiled
    /// expression in place about 2 µs more: the list is made with the
    /// tables, and a slot holds two pointers.
    compiled: OnceLock<Box<[Compiled]>>,
    pub digest: String,
}

/// The entries of a table: the shipped ones as `build.rs` packed them, read
/// in place (a fresh instance unpacks nothing), or an operator's as parsed.
enum Entries {
    Packed(&'static [Packed]),
    Parsed(Vec<Marker>),
}

/// What scanning reads of an entry on every hit (`Tables::head`).
struct Head<'a> {
    text: &'a str,
    kind: MarkerMatch,
    /// Neither a shape nor an unless: the match alone confirms it.
    plain: bool,
    weak: bool,
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

/// A line of the written tables that defines a named pattern (`patterns.rs`).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NamedPattern {
    pattern: String,
    regex: String,
    source: String,
}

/// Parses written tables: every entry needs a source. A named pattern's line
/// defines it for the lines after it, whose `shape` and `unless` are read
/// with their references expanded; a status form's line stands for the
/// entries it expands to (`statusforms.rs`). Errors name the line and the
/// problem.
pub fn parse(jsonl: &str) -> Result<Vec<Marker>, String> {
    let mut out: Vec<Marker> = Vec::new();
    let mut named: Vec<(String, String)> = Vec::new();
    for (n, line) in jsonl.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let at = |rule: String| format!("markers line {}: {rule}", n + 1);
        let value: serde_json::Value = serde_json::from_str(line).map_err(|e| at(e.to_string()))?;
        if value.get("pattern").is_some() {
            let p: NamedPattern = serde_json::from_value(value).map_err(|e| at(e.to_string()))?;
            named.push(named_pattern(p, &named).map_err(at)?);
            continue;
        }
        let entries = match value {
            serde_json::Value::Object(form) if form.contains_key(crate::statusforms::KEY) => {
                let table: Vec<_> = out.iter().filter_map(status_row).collect();
                crate::statusforms::expand(&form, &table).map_err(at)?.into_iter().map(Into::into).collect()
            }
            other => vec![other],
        };
        for value in entries {
            let mut m: Marker = serde_json::from_value(value).map_err(|e| at(e.to_string()))?;
            for expr in [&mut m.shape, &mut m.unless].into_iter().flatten() {
                *expr = Cow::Owned(crate::patterns::expand(expr, &named).map_err(at)?);
            }
            check(&m).map_err(|(_, rule)| at(rule))?;
            if let Some(rule) = duplicate(&out, &m) {
                return Err(at(rule));
            }
            out.push(m);
        }
    }
    Ok(out)
}

/// An `http` entry as a row of the status table (`statusforms.rs`).
fn status_row(m: &Marker) -> Option<crate::statusforms::Status> {
    (m.kind == MarkerMatch::Http).then(|| crate::statusforms::Status {
        code: m.marker.to_string(),
        class: m.class.as_str().to_string(),
        status: m.status,
        generic: m.generic,
    })
}

/// A named pattern's definition, checked: a new name, a source, an expression.
fn named_pattern(p: NamedPattern, before: &[(String, String)]) -> Result<(String, String), String> {
    if !crate::patterns::is_name(&p.pattern) || before.iter().any(|(n, _)| *n == p.pattern) {
        return Err(format!("pattern {:?}: a new name of lower-case letters and `_`", p.pattern));
    }
    if p.source.trim().is_empty() {
        return Err(format!("pattern {:?} has no source", p.pattern));
    }
    compile(&p.regex).map_err(|e| format!("pattern {:?} is not a regular expression: {e}", p.pattern))?;
    Ok((p.pattern, p.regex))
}

/// Why `m` repeats an entry of `before` (the same text, kind and context), if it does.
pub fn duplicate(before: &[Marker], m: &Marker) -> Option<String> {
    let same = |o: &Marker| o.marker == m.marker && o.kind == m.kind && o.shape == m.shape && o.unless == m.unless;
    before.iter().any(same).then(|| format!("duplicate marker {:?}", m.marker))
}

/// The longest marker text, and the longest `shape` or `unless`, an operator may give.
pub const MAX_MARKER: usize = 256;
pub const MAX_EXPRESSION: usize = 512;

/// Checks one entry: the field at fault and the rule it breaks. The same
/// rules hold for the shipped tables and for `config.classify.markers`.
pub fn check(m: &Marker) -> Result<(), (&'static str, String)> {
    let text = is_text(m.kind);
    if m.marker.is_empty() || m.marker != m.marker.to_ascii_lowercase() || m.marker.trim() != m.marker {
        return Err(("marker", format!("marker must be non-empty, lower-case and trimmed: {:?}", m.marker)));
    }
    if m.marker.len() > MAX_MARKER {
        return Err(("marker", format!("at most {MAX_MARKER} bytes")));
    }
    if m.source.trim().is_empty() {
        return Err(("source", format!("marker {:?} has no source", m.marker)));
    }
    if text && (m.marker.contains("##") || m.marker.split('#').all(str::is_empty)) {
        return Err(("marker", format!("`#` stands for a digit run; {:?} has `##` or no literal text", m.marker)));
    }
    if !text && m.marker.contains('#') {
        return Err(("marker", format!("`#` is only allowed in text markers: {:?}", m.marker)));
    }
    if m.class == FailureClass::Indeterminate && (!text || m.weak || m.generic) {
        return Err(("class", format!("an indeterminate (neutral) marker is a plain text marker: {:?}", m.marker)));
    }
    if !text && (m.shape.is_some() || m.unless.is_some() || m.near) {
        return Err(("shape", format!("only text markers have a shape: {:?}", m.marker)));
    }
    if m.frame && (!text || m.class != FailureClass::Work || m.weak) {
        return Err(("frame", format!("only a strong work text marker frames a message: {:?}", m.marker)));
    }
    for (field, re) in [("shape", &m.shape), ("unless", &m.unless)] {
        let Some(r) = re else { continue };
        if r.len() > MAX_EXPRESSION {
            return Err((field, format!("at most {MAX_EXPRESSION} bytes")));
        }
        if r.contains(crate::patterns::OPEN) {
            let rule = format!("{field} of {:?} names a pattern (`(?&name)`): only the shipped tables do", m.marker);
            return Err((field, rule));
        }
        compile(r).map_err(|e| (field, format!("{field} of {:?} is not a regular expression: {e}", m.marker)))?;
    }
    Ok(())
}

impl Tables {
    /// Compiles `markers`; `source_text` is the table they were parsed from,
    /// whose SHA-256 is the digest.
    pub fn build(markers: Vec<Marker>, source_text: &str) -> Tables {
        Tables::compile(markers, hex(&Sha256::digest(source_text.as_bytes())))
    }

    fn compile(markers: Vec<Marker>, digest: String) -> Tables {
        let text_index: Vec<u16> =
            markers.iter().enumerate().filter(|(_, m)| is_text(m.kind)).map(|(i, _)| i as u16).collect();
        let literals: Vec<&[u8]> =
            text_index.iter().map(|&i| automaton::anchor(&markers[i as usize].marker).1.as_bytes()).collect();
        let automaton = automaton::build(&literals).expect("marker automaton builds");
        let shaped = (0..text_index.len() as u16)
            .filter(|&p| {
                let m = &markers[text_index[p as usize] as usize];
                m.shape.is_some() || m.unless.is_some()
            })
            .collect();
        Tables {
            entries: Entries::Parsed(markers),
            text_index: Cow::Owned(text_index),
            automaton,
            shaped: Cow::Owned(shaped),
            compiled: OnceLock::new(),
            digest,
        }
    }

    /// Entry `i`: an operator's as parsed, a shipped one unpacked (no copy of
    /// its texts).
    pub fn marker(&self, i: usize) -> Cow<'_, Marker> {
        match &self.entries {
            Entries::Packed(p) => Cow::Owned(p[i].unpack()),
            Entries::Parsed(p) => Cow::Borrowed(&p[i]),
        }
    }

    /// What scanning reads of entry `i` on every hit, without unpacking it.
    fn head(&self, i: usize) -> Head<'_> {
        match &self.entries {
            Entries::Packed(p) => {
                let m = &p[i];
                Head { text: m.text(), kind: m.kind, plain: m.shape == 0 && m.unless == 0, weak: m.flag(0) }
            }
            Entries::Parsed(p) => {
                let m = &p[i];
                Head { text: &m.marker, kind: m.kind, plain: m.shape.is_none() && m.unless.is_none(), weak: m.weak }
            }
        }
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        match &self.entries {
            Entries::Packed(p) => p.len(),
            Entries::Parsed(p) => p.len(),
        }
    }

    /// Whether the table has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every entry, in order.
    pub fn markers(&self) -> impl Iterator<Item = Cow<'_, Marker>> + '_ {
        (0..self.len()).map(|i| self.marker(i))
    }

    /// Every text marker in `text`, in order of position. Overlapping matches
    /// are kept, but a match that lies inside a longer match is dropped: the
    /// longer marker is the more specific reading of the same words
    /// (`disk quota exceeded` holds `quota exceeded`). A weak marker, which
    /// decides only when nothing else does, hides only weak markers.
    pub fn scan(&self, text: &str) -> Vec<Hit> {
        let bytes = text.as_bytes();
        let mut hits = Vec::new();
        // The automaton is ASCII-case-insensitive: the text is read as it is.
        self.automaton.scan(bytes, |p, start, end| {
            let idx = self.text_index[p] as usize;
            if let Some((start, end)) = self.confirm(p, idx, text, start, end) {
                hits.push(Hit { marker: idx, start, end });
            }
        });
        let weak = |h: &Hit| self.head(h.marker).weak;
        let mut kept = outermost(hits.iter().copied().filter(|h| !weak(h)).collect());
        kept.extend(outermost(hits).into_iter().filter(weak));
        kept.sort_by_key(|h| (h.start, std::cmp::Reverse(h.end), h.marker));
        kept
    }

    /// The whole match of text marker `idx` (literal `p`) around its anchor
    /// at `[start, end)`, if its digits, bounds, verdict form and context fit.
    fn confirm(&self, p: usize, idx: usize, text: &str, start: usize, end: usize) -> Option<(usize, usize)> {
        let (head, bytes) = (self.head(idx), text.as_bytes());
        let (start, end) = extend(head.text, bytes, start, end)?;
        let bounded = head.kind == MarkerMatch::Substring || word_bounded(bytes, start, end, head.text.as_bytes());
        if !bounded || (head.kind == MarkerMatch::Line && !verdict(bytes, start, end)) {
            return None;
        }
        if head.plain {
            return Some((start, end));
        }
        let compiled = self.compiled.get_or_init(|| self.shaped.iter().map(|_| Compiled::default()).collect());
        let slot = self.shaped.binary_search(&(p as u16)).expect("a marker that is not plain has a shape or an unless");
        fits(&self.marker(idx), &compiled[slot], text, start, end).then_some((start, end))
    }

    /// The marker of `kind` equal to `value` (case-insensitive, trimmed).
    pub fn lookup(&self, kind: MarkerMatch, value: &str) -> Option<usize> {
        let v = value.trim();
        (0..self.len()).position(|i| {
            let head = self.head(i);
            head.kind == kind && head.text.eq_ignore_ascii_case(v)
        })
    }
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The hits not strictly inside another hit, sorted by position (longest first
/// at one position). One sort and one sweep.
fn outermost(mut hits: Vec<Hit>) -> Vec<Hit> {
    hits.sort_by_key(|h| (h.start, std::cmp::Reverse(h.end), h.marker));
    // The furthest end seen so far and the first start that reached it.
    let mut reach: Option<(usize, usize)> = None;
    hits.retain(|h| {
        let inside = match reach {
            Some((end, start)) => end > h.end || (end == h.end && start < h.start),
            None => false,
        };
        if reach.is_none_or(|(end, _)| h.end > end) {
            reach = Some((h.end, h.start));
        }
        !inside
    });
    hits
}

/// A `line` match: only blanks before it on its line, and no lower-case letter in it.
fn verdict(text: &[u8], start: usize, end: usize) -> bool {
    let line_start = text[..start].iter().rposition(|&b| b == b'\n').map(|i| i + 1).unwrap_or(0);
    text[line_start..start].iter().all(|b| *b == b' ' || *b == b'\t' || *b == b'\r')
        && !text[start..end].iter().any(u8::is_ascii_lowercase)
}

fn word_bounded(text: &[u8], start: usize, end: usize, marker: &[u8]) -> bool {
    // A `#` at either end stands for digits, which are word characters.
    let first = marker.first().map(|&b| if b == b'#' { b'0' } else { b }).unwrap_or(b' ');
    let last = marker.last().map(|&b| if b == b'#' { b'0' } else { b }).unwrap_or(b' ');
    if is_word(first) && start > 0 && is_word(text[start - 1]) && !after_escape(text, start) {
        return false;
    }
    if is_word(last) && end < text.len() && is_word(text[end]) {
        return false;
    }
    true
}

/// Whether `start` follows a JSON or C string escape of a blank (`\n`, `\r`,
/// `\t`): a response body quoted inside a message (`"...details.)\nTry again
/// in 20 minutes"`) keeps its line breaks as two bytes, and the word after one
/// begins there as it would after the line break it stands for. The backslash
/// must not be escaped itself (an odd run of them; runs are counted up to 16
/// bytes, so a hit's check stays bounded).
fn after_escape(text: &[u8], start: usize) -> bool {
    if start < 2 || !matches!(text[start - 1], b'n' | b'r' | b't') {
        return false;
    }
    let run = text[..start - 1].iter().rev().take(16).take_while(|&&b| b == b'\\').count();
    run % 2 == 1
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The digest and the number of entries of the shipped tables, without
/// compiling them.
pub fn shipped_info() -> (String, u32) {
    (SHIPPED_DIGEST.trim().to_string(), shipped::SHIPPED_PACKED.len() as u32)
}

/// How many operator lists an instance keeps compiled.
const OPERATOR_CACHE: usize = 4;

/// The tables of an operator's `config.classify.markers` (checked by
/// `config::validate`), compiled once per distinct list: the last
/// [`OPERATOR_CACHE`] lists stay compiled, so a host that passes the same
/// configuration on every call compiles it once.
pub fn operator_tables(list: &[Marker]) -> Arc<Tables> {
    static CACHE: Mutex<Vec<(String, Arc<Tables>)>> = Mutex::new(Vec::new());
    let key = serde_json::to_string(list).unwrap_or_default();
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = cache.iter().position(|(k, _)| *k == key) {
        let hit = cache.remove(i);
        let tables = hit.1.clone();
        cache.insert(0, hit);
        return tables;
    }
    let tables = Arc::new(Tables::compile(list.to_vec(), String::new()));
    cache.insert(0, (key, tables.clone()));
    cache.truncate(OPERATOR_CACHE);
    tables
}

/// The shipped tables, as `build.rs` compiled them: nothing is parsed,
/// built or unpacked here.
pub fn tables() -> &'static Tables {
    use shipped::*;
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| Tables {
        entries: Entries::Packed(&SHIPPED_PACKED),
        text_index: Cow::Borrowed(&SHIPPED_TEXT_INDEX),
        shaped: Cow::Borrowed(&SHIPPED_SHAPED),
        automaton: Automaton {
            classes: Cow::Borrowed(&SHIPPED_CLASSES),
            stride: SHIPPED_STRIDE,
            trans: SHIPPED_TRANS_KIND(&SHIPPED_TRANS),
            start: SHIPPED_START,
            first_match: SHIPPED_FIRST_MATCH,
            resume: Cow::Borrowed(&SHIPPED_RESUME),
            match_ends: Cow::Borrowed(&SHIPPED_MATCH_ENDS),
            verify: Cow::Borrowed(&SHIPPED_VERIFY),
            verify_next: Cow::Borrowed(&SHIPPED_VERIFY_NEXT),
            follow: Cow::Borrowed(&SHIPPED_FOLLOW),
            follow_masks: Cow::Borrowed(&SHIPPED_FOLLOW_MASKS),
            literal_bytes: Cow::Borrowed(SHIPPED_LITERALS),
            literal_ends: Cow::Borrowed(&SHIPPED_LITERAL_ENDS),
            literal_wraps: Cow::Borrowed(&SHIPPED_LITERAL_WRAPS),
        },
        compiled: OnceLock::new(),
        digest: SHIPPED_DIGEST.trim().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every shipped status form reads every status of the status table as
    /// the table classes it, and reads no other code: each form written
    /// with each code in its place.
    #[test]
    fn every_status_form_reads_every_status_as_the_table_does() {
        let t = tables();
        let table: Vec<Marker> = t.markers().filter(|m| m.kind == MarkerMatch::Http).map(|m| m.into_owned()).collect();
        let forms: Vec<String> = MARKERS_JSONL
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v.get(crate::statusforms::KEY).and_then(|f| f.as_str()).map(str::to_string))
            .collect();
        assert!(forms.len() >= 40 && table.len() >= 25, "{} forms, {} statuses", forms.len(), table.len());
        let read = |text: &str, form: &str| -> Vec<FailureClass> {
            let hits = t.scan(text).into_iter().map(|h| t.marker(h.marker).into_owned());
            hits.filter(|m| m.marker == form).map(|m| m.class).collect()
        };
        for form in &forms {
            for status in &table {
                let text = form.replace('#', &status.marker);
                assert_eq!(read(&text, form), [status.class], "{text:?} reads as http {}", status.marker);
            }
            for other in ["200", "409", "418", "599"] {
                let text = form.replace('#', other);
                assert_eq!(read(&text, form), [], "{text:?} is no status of the table");
            }
        }
    }

    #[test]
    fn operator_tables_compile_once_per_distinct_list() {
        let list = |m: &str| {
            vec![Marker {
                class: FailureClass::Work,
                marker: m.to_string().into(),
                kind: MarkerMatch::Word,
                source: "test".into(),
                weak: false,
                generic: false,
                throttle: false,
                status: false,
                shape: None,
                unless: None,
                near: false,
                frame: false,
            }]
        };
        let a = operator_tables(&list("alpha fault"));
        assert!(Arc::ptr_eq(&a, &operator_tables(&list("alpha fault"))), "the same list is compiled once");
        assert!(!Arc::ptr_eq(&a, &operator_tables(&list("beta fault"))));
        for i in 0..OPERATOR_CACHE {
            operator_tables(&list(&format!("other fault {i}")));
        }
        assert!(!Arc::ptr_eq(&a, &operator_tables(&list("alpha fault"))), "the cache holds the last few lists");
        assert_eq!(a.scan("x alpha fault y").len(), 1);
    }

    #[test]
    fn the_compiled_tables_are_the_written_ones_without_sources() {
        let written = parse(MARKERS_JSONL).unwrap();
        let shipped = tables();
        assert_eq!(written.len(), shipped.len());
        for (w, c) in written.iter().zip(shipped.markers()) {
            assert_eq!(Marker { source: Cow::Borrowed(""), ..w.clone() }, *c);
        }
        assert_eq!(tables().digest, hex(&Sha256::digest(MARKERS_JSONL.as_bytes())));
        assert_eq!(shipped_info(), (tables().digest.clone(), written.len() as u32));
        // The automaton build.rs wrote is the one the crate builds from the same entries.
        let built = Tables::build(written, MARKERS_JSONL);
        let a = (&built.automaton, &tables().automaton);
        assert_eq!((a.0.trans.len(), a.0.start, a.0.first_match), (a.1.trans.len(), a.1.start, a.1.first_match));
        assert_eq!((&a.0.verify, &a.0.literal_bytes, &a.0.classes), (&a.1.verify, &a.1.literal_bytes, &a.1.classes));
        assert_eq!((&a.0.trans, &a.0.resume), (&a.1.trans, &a.1.resume));
        assert_eq!(built.text_index, tables().text_index);
    }

    /// A named pattern stands for its expression in the lines after it, and
    /// each way a definition or a reference can be wrong is refused naming
    /// its line.
    #[test]
    fn named_patterns_expand_in_later_lines_only() {
        let def = r#"{"pattern": "local", "regex": "\\blocalhost\\b", "source": "s"}"#;
        let entry = r#"{"class": "environmental", "marker": "refused", "match": "word", "source": "s", "unless": "x|(?&local)"}"#;
        let m = parse(&format!("{def}\n{entry}\n")).unwrap();
        assert_eq!(m.len(), 1, "a definition is no marker");
        assert_eq!(m[0].unless.as_deref(), Some(r"x|(?:\blocalhost\b)"));
        let refused = |text: String| parse(&text).unwrap_err();
        assert!(refused(format!("{entry}\n{def}")).starts_with("markers line 1: no pattern named \"local\""));
        assert!(refused(format!("{def}\n{def}")).contains("line 2: pattern \"local\": a new name"));
        assert!(refused(def.replace(r#""s""#, r#""""#)).contains("has no source"));
        assert!(refused(def.replace(r"\\blocalhost\\b", "(unclosed")).contains("is not a regular expression"));
        assert!(refused(def.replace(r#""s"}"#, r#""s", "weak": true}"#)).contains("unknown field"));
    }

    /// An operator's entry writes its expressions out: a reference is refused
    /// by name, not as a broken expression.
    #[test]
    fn an_operator_marker_may_not_name_a_pattern() {
        let entry =
            r#"{"class": "transient_transport", "marker": "bundle upload refused", "match": "word", "source": "s"}"#;
        let m = Marker { unless: Some(Cow::Borrowed("(?&local)")), ..parse(entry).unwrap()[0].clone() };
        let (field, rule) = check(&m).unwrap_err();
        assert_eq!(field, "unless");
        assert!(rule.contains("names a pattern"), "{rule}");
    }

    /// The refusal rules read the two named patterns the file defines: the
    /// parsed entries hold each pattern's expression, and no reference is left.
    #[test]
    fn the_shipped_refusal_rules_share_the_named_patterns() {
        let regex = |name: &str| {
            let line = MARKERS_JSONL.lines().find(|l| l.contains(&format!(r#""pattern": "{name}""#))).unwrap();
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            format!("(?:{})", v["regex"].as_str().unwrap())
        };
        let (local, remote) = (regex("local"), regex("remote"));
        let parsed = parse(MARKERS_JSONL).unwrap();
        let exprs: Vec<&str> =
            parsed.iter().flat_map(|m| [m.shape.as_deref(), m.unless.as_deref()]).flatten().collect();
        assert!(exprs.iter().all(|e| !e.contains(crate::patterns::OPEN)), "every reference is expanded");
        let uses = |expr: &str| exprs.iter().filter(|e| **e == expr).count();
        assert!(uses(&local) > 40 && uses(&remote) > 15, "local {} remote {}", uses(&local), uses(&remote));
    }

    #[test]
    fn shipped_tables_parse_and_every_entry_has_a_source() {
        let m = parse(MARKERS_JSONL).unwrap();
        assert!(m.len() > 50);
        assert!(m.iter().all(|m| !m.source.is_empty()));
    }

    /// A shipped entry stays 12 bytes: each byte more is about 3 KB of the
    /// component.
    #[test]
    fn a_packed_entry_is_twelve_bytes() {
        assert_eq!(std::mem::size_of::<Packed>(), 12);
    }

    /// The shaped list holds each text marker with a shape or an unless and
    /// no other, and `build.rs` lists the shipped ones as the crate does.
    #[test]
    fn shaped_lists_the_markers_with_a_shape_or_an_unless() {
        let t = tables();
        let written = parse(MARKERS_JSONL).unwrap();
        let text: Vec<&Marker> = written.iter().filter(|m| is_text(m.kind)).collect();
        let shaped: Vec<u16> = (0..text.len() as u16)
            .filter(|&p| text[p as usize].shape.is_some() || text[p as usize].unless.is_some())
            .collect();
        assert!(shaped.len() > 100 && shaped.len() * 3 < text.len(), "{} of {}", shaped.len(), text.len());
        assert_eq!(t.shaped[..], shaped[..]);
        assert!((0..t.text_index.len()).all(|p| t.head(t.text_index[p] as usize).plain != shaped.contains(&(p as u16))));
        let built = Tables::build(written, MARKERS_JSONL);
        assert_eq!(built.shaped, t.shaped, "build.rs lists the shaped markers as the crate does");
    }

    /// The written text markers whose automaton anchor is `bad`.
    fn shipped_text_markers_whose_anchor(bad: impl Fn(&str) -> bool) -> Vec<String> {
        let all = parse(MARKERS_JSONL).unwrap();
        all.iter()
            .filter(|m| is_text(m.kind) && bad(crate::automaton::anchor(&m.marker).1))
            .map(|m| m.marker.to_string())
            .collect()
    }

    /// Every byte of a text marker's automaton prefix is a byte class of the
    /// shipped DFA, and each class widens every state: the Chinese text of
    /// two provider messages once cost 13 KB of the component. Shipped
    /// markers keep their anchors ASCII (a provider's code, not its prose).
    #[test]
    fn shipped_anchor_prefixes_are_ascii() {
        let wide =
            shipped_text_markers_whose_anchor(|a| !a.bytes().take(crate::automaton::PREFIX).all(|b| b.is_ascii()));
        assert!(wide.is_empty(), "non-ASCII anchor prefixes: {wide:?}");
    }

    /// No shipped anchor is a bare number: one would hit inside every
    /// longer number of a log (ids, sizes, seeds) and cost a comparison
    /// there. A code is written with what names it (`errno = 10060`,
    /// `"1113"`), or with `#` and a code-set shape (`codeset.rs`).
    #[test]
    fn shipped_anchors_are_no_bare_numbers() {
        let bare = shipped_text_markers_whose_anchor(|a| a.trim().bytes().all(|b| b.is_ascii_digit()));
        assert!(bare.is_empty(), "anchors that are bare numbers: {bare:?}");
    }

    #[test]
    fn word_markers_do_not_fire_inside_words() {
        let t = tables();
        let names = |text: &str| -> Vec<String> {
            t.scan(text).iter().map(|h| t.marker(h.marker).marker.to_string()).collect()
        };
        assert!(names("the latest failed run").iter().all(|m| m != "test failed"));
        assert!(names("2 tests failed").iter().any(|m| m == "tests failed"));
        assert!(names("read ECONNRESET").iter().any(|m| m == "econnreset"));
        assert!(names("pipeline recipe").is_empty());
    }

    fn names(text: &str) -> Vec<String> {
        let t = tables();
        t.scan(text).iter().map(|h| t.marker(h.marker).marker.to_string()).collect()
    }

    #[test]
    fn hash_stands_for_a_digit_run() {
        assert!(names("src/a.ts(4,72): error TS2503: Cannot find").contains(&"error ts#:".to_string()));
        assert!(!names("error TS: no code").contains(&"error ts#:".to_string()));
        assert!(names("Found 12 errors in 3 files").contains(&"found # errors".to_string()));
        // `found # error` stops at a word boundary, so `errors` is not `error`.
        assert!(!names("Found 12 errors").contains(&"found # error".to_string()));
        assert!(names("src/main.c:12:5: error: x").contains(&":#:#: error:".to_string()));
        assert!(!names("src/main.c:12: error: x").contains(&":#:#: error:".to_string()));
        assert!(names("✖ 1 problem (1 error, 0 warnings)").contains(&"# problem (".to_string()));
        // A digit run glued to a word is not a count.
        assert!(!names("v1 problem (see notes)").contains(&"# problem (".to_string()));
    }

    #[test]
    fn line_markers_want_a_capitalised_verdict_at_line_start() {
        assert!(names("FAILED tests/a.py::t - assert 1 == 2").contains(&"failed".to_string()));
        assert!(names("  --- FAIL: TestX (0.01s)").contains(&"--- fail:".to_string()));
        assert!(!names("Failed to connect to github.com port 443").contains(&"failed".to_string()));
        assert!(!names("step 3 FAILED: timeout").contains(&"failed".to_string()));
    }

    #[test]
    fn a_hit_inside_a_longer_hit_is_dropped() {
        let n = names("Claude usage limit reached. Your limit will reset at 1pm");
        assert_eq!(n, vec!["usage limit reached".to_string()]);
        let n = names("write error: Disk quota exceeded");
        assert_eq!(n, vec!["disk quota exceeded".to_string()]);
        // Overlapping but not nested hits both stay.
        let n = names("connection reset by peer");
        assert!(n.contains(&"connection reset by peer".to_string()));
    }

    #[test]
    fn hash_is_only_for_text_markers() {
        let bad = "{\"class\":\"work\",\"marker\":\"4#\",\"match\":\"http\",\"source\":\"s\"}";
        assert!(parse(bad).unwrap_err().contains("only allowed in text"));
        let bad = "{\"class\":\"work\",\"marker\":\"a##b\",\"match\":\"word\",\"source\":\"s\"}";
        assert!(parse(bad).unwrap_err().contains("digit run"));
    }

    #[test]
    fn a_weak_marker_hides_only_weak_markers() {
        let line = |m: &str, weak: bool| {
            format!(
                "{{\"class\":\"work\",\"marker\":\"{m}\",\"match\":\"substring\",\"source\":\"s\",\"weak\":{weak}}}\n"
            )
        };
        let text = line("bc", false) + &line("bcc", true) + &line("bccd", true);
        let t = Tables::build(parse(&text).unwrap(), &text);
        let found =
            |s: &str| -> Vec<String> { t.scan(s).iter().map(|h| t.marker(h.marker).marker.to_string()).collect() };
        // The strong `bc` stays inside the weak `bcc`; the weak `bcc` hides in the weak `bccd`.
        assert_eq!(found(" bcc"), ["bcc", "bc"]);
        assert_eq!(found(" bccd"), ["bccd", "bc"]);
    }

    #[test]
    fn only_a_strong_work_text_marker_frames() {
        let entry = |class: &str, kind: &str, weak: bool| {
            format!("{{\"class\":\"{class}\",\"marker\":\"x:\",\"match\":\"{kind}\",\"source\":\"s\",\"weak\":{weak},\"frame\":true}}")
        };
        assert!(parse(&entry("work", "substring", false)).is_ok());
        for bad in [
            entry("transient_transport", "substring", false),
            entry("work", "code", false),
            entry("work", "word", true),
        ] {
            let m: Marker = serde_json::from_str(&bad).unwrap();
            assert_eq!(check(&m).unwrap_err().0, "frame", "{bad}");
        }
    }

    #[test]
    fn shapes_are_regex_lite_expressions() {
        let with = |shape: &str| Marker {
            shape: Some(shape.to_string().into()),
            ..parse("{\"class\":\"work\",\"marker\":\"x\",\"match\":\"word\",\"source\":\"s\"}").unwrap()[0].clone()
        };
        assert!(check(&with(r"^\s*x:\d+\b")).is_ok());
        let (field, rule) = check(&with(r"\p{L}+ x")).unwrap_err();
        assert_eq!(field, "shape");
        assert!(rule.contains("not a regular expression"), "{rule}");
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
