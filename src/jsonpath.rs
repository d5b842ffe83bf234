//! Where in a JSON text a parse stopped: the keys and indexes that lead to
//! the value serde_json was reading when it refused it (`json.rs` names a
//! refused value by this path).
//!
//! Hand-written on purpose: the `serde_path_to_error` crate tracks the same
//! path while it deserializes, by wrapping every deserializer and visitor,
//! and those wrappers, instantiated for every type of the model, took about
//! 100 KB of the component's 1 MiB. This reads the text once more, only
//! after a refusal, up to the place serde_json's error names; a test checks
//! it against `serde_path_to_error` on refused inputs of every argument.

/// One step of a path: an object's key (or an enum's variant) or an array's index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Key(String),
    Index(usize),
}

/// An open object or array, and where in it the scan is.
enum Frame {
    /// The key read last (until the next comma), whether the next string is
    /// a key, and whether the key's `:` is still to come.
    Object { key: Option<String>, in_key: bool, before_colon: bool },
    /// The element's index, and whether the element has begun.
    Array { index: usize, started: bool },
}

/// What a refusal is named by, where `serde_path_to_error` differs from
/// the key or index read last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// A value (or an unknown field) is named by its key.
    Value,
    /// A missing field: serde_json refuses it at the `}` it has not yet
    /// read, and it names its object, not the key read last.
    Missing,
    /// An unknown variant: where it is an object's key (`{"nope": {}}`),
    /// it names its enum, not itself.
    Variant,
    /// The text's structure between values (a missing `,` or `:`, a text
    /// cut between values): it names the object or array, not a member.
    /// serde_json names the place after the byte it refused, so
    /// [`refusal_at`] passes the place before it (but the end of a text cut
    /// short).
    Structure,
}

/// serde_json's refusals of the text's structure between values, which
/// name the object or array they are in ([`Refusal::Structure`]).
const STRUCTURE: [&str; 6] = [
    "expected `,` or",
    "expected `:`",
    "EOF while parsing an object",
    "EOF while parsing a list",
    "key must be a string",
    "trailing comma",
];

/// The path of the value that serde_json refused in `text` with `e`.
pub fn refused_path(text: &str, e: &serde_json::Error) -> Vec<Step> {
    let (at, refusal) = refusal_at(text, &e.to_string(), offset_of(text, e.line(), e.column()));
    path_at(text, at, refusal)
}

/// Where a refusal lies and what kind it is, from serde_json's message and
/// its position `at`.
fn refusal_at(text: &str, rule: &str, at: usize) -> (usize, Refusal) {
    // After a whole object, array or string, "expected value" is about the
    // structure (a second key in an enum's object), not about a value; but
    // an empty object where an enum was expected is that value's refusal.
    let mut before = text.get(..at).unwrap_or("").bytes().rev().filter(|b| !b.is_ascii_whitespace());
    let (prev, prev2) = (before.next(), before.next());
    let after_value = matches!(prev, Some(b'}' | b']' | b'"')) && (prev, prev2) != (Some(b'}'), Some(b'{'));
    if rule.starts_with("missing field `") {
        (at, Refusal::Missing)
    } else if rule.starts_with("unknown variant") {
        (at, Refusal::Variant)
    } else if rule.starts_with("expected value") && after_value {
        (at, Refusal::Structure)
    } else if STRUCTURE.iter().any(|s| rule.starts_with(s)) {
        // serde_json names the place after the byte it refused, but the end
        // of a text cut short.
        (if rule.starts_with("EOF") { at } else { at.saturating_sub(1) }, Refusal::Structure)
    } else {
        (at, Refusal::Value)
    }
}

/// The path of the value being read at byte `at` of `text` (the position
/// of a serde_json error): a key counts from the moment it is read, as
/// `serde_path_to_error` counts it, an array's index once its element has
/// begun, except as `refusal` says.
fn path_at(text: &str, at: usize, refusal: Refusal) -> Vec<Step> {
    let bytes = &text.as_bytes()[..at.min(text.len())];
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if !matches!(b, b'}' | b']' | b',' | b':') && !b.is_ascii_whitespace() {
            if let Some(Frame::Array { started, .. }) = stack.last_mut() {
                *started = true;
            }
        }
        match b {
            b'{' => stack.push(Frame::Object { key: None, in_key: true, before_colon: false }),
            b'[' => stack.push(Frame::Array { index: 0, started: false }),
            b'}' | b']' => {
                stack.pop();
            }
            b':' => {
                if let Some(Frame::Object { before_colon, .. }) = stack.last_mut() {
                    *before_colon = false;
                }
            }
            b',' => match stack.last_mut() {
                Some(Frame::Object { key, in_key, .. }) => (*key, *in_key) = (None, true),
                Some(Frame::Array { index, started }) => (*index, *started) = (*index + 1, false),
                None => {}
            },
            b'"' => {
                let end = string_end(bytes, i + 1);
                if let Some(Frame::Object { key, in_key: in_key @ true, before_colon }) = stack.last_mut() {
                    // A key cut short is not yet read; a whole one is decoded by serde_json.
                    if let Some(read) = end.and_then(|end| serde_json::from_str::<String>(&text[i..end]).ok()) {
                        (*key, *in_key, *before_colon) = (Some(read), false, true);
                    }
                }
                i = end.unwrap_or(bytes.len());
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    // serde_json refuses a value of the wrong type before reading it: the
    // element it refused has begun where the refusal is.
    let next = text.as_bytes().get(at..).and_then(|r| r.iter().find(|b| !b.is_ascii_whitespace()));
    let begins = next.is_some_and(|b| !matches!(b, b'}' | b']' | b',' | b':'));
    match (stack.last_mut(), refusal) {
        (Some(Frame::Array { started, .. }), Refusal::Value) if begins => *started = true,
        (Some(Frame::Object { key, .. }), Refusal::Missing | Refusal::Structure) => *key = None,
        (Some(Frame::Object { key, before_colon: true, .. }), Refusal::Variant) => *key = None,
        (Some(Frame::Array { started, .. }), Refusal::Structure) => *started = false,
        _ => {}
    }
    stack
        .into_iter()
        .filter_map(|f| match f {
            Frame::Object { key, .. } => key.map(Step::Key),
            Frame::Array { index, started } => started.then_some(Step::Index(index)),
        })
        .collect()
}

/// The index after the closing quote of the string whose contents start
/// at `from` (after its opening quote), or `None` where the text is cut
/// inside it.
fn string_end(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    None
}

/// The byte index of serde_json's `line` and `column` (1-based line; the
/// column counts the bytes after the line's start).
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let start: usize = text.split_inclusive('\n').take(line.saturating_sub(1)).map(str::len).sum();
    (start + column).min(text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str) -> Vec<Step> {
        path_at(text, text.len(), Refusal::Value)
    }

    #[test]
    fn a_value_is_named_by_its_keys_and_indexes() {
        let k = |s: &str| Step::Key(s.to_string());
        assert_eq!(keys(r#"{"a": {"b": [1, 2, {"c": "#), vec![k("a"), k("b"), Step::Index(2), k("c")]);
        assert_eq!(keys(r#"{"a": 1, "b""#), vec![k("b")], "a key counts once read");
        assert_eq!(keys(r#"{"a": {"x": 1}, "b": "#), vec![k("b")]);
        assert_eq!(keys(r#"{"a\"b\u0063\ud83d\ude00": "#), vec![k("a\"bc\u{1f600}")], "a key is decoded");
        assert_eq!(keys(r#"{"a": "}{[,:", "b": [1, "x"#), vec![k("b"), Step::Index(1)], "brackets in strings");
        assert_eq!(keys(r#"{"b": [1, "#), vec![k("b")], "an index counts once its element begins");
        assert_eq!(keys(""), vec![]);
        let closing = r#"{"a": {"x": 1"#;
        assert_eq!(path_at(closing, closing.len(), Refusal::Missing), vec![k("a")], "a missing field names its object");
        let variant = r#"{"situation": {"nope""#;
        assert_eq!(
            path_at(variant, variant.len(), Refusal::Variant),
            vec![k("situation")],
            "an unknown variant its enum"
        );
        let unit = r#"{"same_failure": "exact""#;
        assert_eq!(
            path_at(unit, unit.len(), Refusal::Variant),
            vec![k("same_failure")],
            "a variant as a value its key"
        );
    }

    #[test]
    fn serde_json_positions_are_byte_offsets() {
        let text = "{\n  \"a\": x}";
        let e = serde_json::from_str::<serde_json::Value>(text).unwrap_err();
        assert_eq!(&text[..offset_of(text, e.line(), e.column())], "{\n  \"a\": x");
    }
}
