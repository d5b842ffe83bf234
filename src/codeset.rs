//! Shapes that only say which codes a marker's digits may be.
//!
//! A status phrase is a marker with one `#` and a shape that lists the codes
//! of the status table, `\berror: (?:408|429|500|502|503|504|52[0-4]|529)\b`
//! for `error: #`. regex-lite has no literal prefilter, so such a shape costs
//! a pass over its whole line, and a family of status phrases would cost
//! several on every line that states a status. A shape of exactly that form
//! (an optional `\b`, the marker's text before `#`, a group of digit codes,
//! the marker's text after `#`, an optional `\b`) is checked instead as a
//! set of codes at the hit. It says the same of the hit; unlike the
//! expression, it does not also fire because another status elsewhere on the
//! line fits, which is that other hit's business. A shape that is only the
//! group of codes, `(?:401|403)`, says the same in fewer bytes: the marker's
//! `#` is one of them, with a word bound where the marker opens with a word
//! character and where it ends at its `#` (the status forms' entries are
//! written so, `statusforms.rs`, and 46 forms share five such shapes). Any
//! other shape stays a regular expression (`markers.rs`).

/// The codes a marker's digits may be, and the word bounds around the match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeSet {
    codes: Vec<String>,
    /// The lengths of the marker's text before and after its `#`.
    before: usize,
    after: usize,
    bound_start: bool,
    bound_end: bool,
}

impl CodeSet {
    /// The code set `shape` states for `marker`, if the shape has that form.
    pub fn parse(marker: &str, shape: &str) -> Option<CodeSet> {
        let (before, after) = marker.split_once('#')?;
        if after.contains('#') {
            return None;
        }
        if let Some(group) = shape.strip_prefix("(?:").and_then(|g| g.strip_suffix(')')) {
            if !group.contains(['(', ')']) {
                let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
                let codes = codes(group)?;
                let (bound_start, bound_end) = (before.starts_with(word), after.is_empty());
                return Some(CodeSet { codes, before: before.len(), after: after.len(), bound_start, bound_end });
            }
        }
        let (bound_start, rest) = strip(shape.strip_prefix(r"\b"), shape);
        let (bound_end, rest) = strip(rest.strip_suffix(r"\b"), rest);
        let (head, group, tail) = split(rest)?;
        if unescape(head)? != before || unescape(tail)? != after {
            return None;
        }
        let codes = codes(group)?;
        Some(CodeSet { codes, before: before.len(), after: after.len(), bound_start, bound_end })
    }

    /// Whether the match `[start, end)` of the marker in `text` fits: its
    /// digits are one of the codes and the word bounds hold.
    pub fn fits(&self, text: &str, start: usize, end: usize) -> bool {
        let bytes = text.as_bytes();
        let Some(digits) = text.get(start + self.before..end.saturating_sub(self.after)) else { return false };
        let word = |i: usize| bytes.get(i).is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
        let boundary = |i: usize| (i > 0 && word(i - 1)) != word(i);
        self.codes.iter().any(|c| c == digits)
            && (!self.bound_start || boundary(start))
            && (!self.bound_end || boundary(end))
    }
}

/// The text before the codes, the codes (`(?:a|b)` or one code written
/// bare) and the text after them.
fn split(shape: &str) -> Option<(&str, &str, &str)> {
    if let Some((head, rest)) = shape.split_once("(?:") {
        let (group, tail) = rest.split_once(')')?;
        return Some((head, group, tail));
    }
    let from = shape.find(|c: char| c.is_ascii_digit())?;
    let to = shape[from..].find(|c: char| !c.is_ascii_digit()).map_or(shape.len(), |n| from + n);
    Some((&shape[..from], &shape[from..to], &shape[to..]))
}

fn strip<'a>(stripped: Option<&'a str>, whole: &'a str) -> (bool, &'a str) {
    match stripped {
        Some(s) => (true, s),
        None => (false, whole),
    }
}

/// A regular expression's literal text, if it is one: `\X` for a
/// punctuation `X` is `X`; any other escape or metacharacter is not literal.
fn unescape(regex: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = regex.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(x) if x.is_ascii_punctuation() => out.push(x),
                _ => return None,
            },
            '.' | '*' | '+' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '|' | '^' | '$' => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

/// The codes a group's alternatives name.
fn codes(group: &str) -> Option<Vec<String>> {
    let mut codes = Vec::new();
    for alternative in group.split('|') {
        codes.extend(expand(alternative)?);
    }
    Some(codes)
}

/// The codes one alternative names: digits, with at most one class of a
/// digit range (`52[0-4]`).
fn expand(alternative: &str) -> Option<Vec<String>> {
    let Some((head, rest)) = alternative.split_once('[') else {
        return alternative.bytes().all(|b| b.is_ascii_digit()).then(|| vec![alternative.to_string()]);
    };
    let (class, tail) = rest.split_once(']')?;
    let (lo, hi) = class.split_once('-')?;
    let digit = |s: &str| (s.len() == 1 && s.as_bytes()[0].is_ascii_digit()).then(|| s.as_bytes()[0]);
    let (lo, hi) = (digit(lo)?, digit(hi)?);
    let plain = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !plain(head) || !plain(tail) || lo > hi {
        return None;
    }
    Some((lo..=hi).map(|d| format!("{head}{}{tail}", d as char)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_shape_is_a_code_set() {
        let set = CodeSet::parse("error: #", r"\berror: (?:408|429|500|52[0-4]|529)\b").unwrap();
        assert_eq!(set.codes, ["408", "429", "500", "520", "521", "522", "523", "524", "529"]);
        let text = "API Error: 522 upstream";
        assert!(set.fits(text, 4, 14));
        assert!(!set.fits("API Error: 403 no", 4, 14));
        // `\b` after the digits: `5221` is no code (extend() reads every digit, so the
        // match would end after it; a word character after the match breaks the bound).
        assert!(!set.fits("error: 522x", 0, 10));
        let lead = CodeSet::parse("# client error", r"\b(?:408|429) client error\b").unwrap();
        assert!(lead.fits("HTTPError: 429 Client Error: Too Many", 11, 27));
        let one = CodeSet::parse("error: #", r"\berror: 401\b").unwrap();
        assert!(one.fits("error: 401", 0, 10) && !one.fits("error: 403", 0, 10));
        let bracket = CodeSet::parse("[#]:", r"\[(?:503)\]:").unwrap();
        assert!(bracket.fits("error [503]: dropped", 6, 12));
    }

    #[test]
    fn a_bare_group_is_a_code_set_bounded_by_the_marker() {
        let set = CodeSet::parse("error: #", "(?:408|52[0-4])").unwrap();
        assert_eq!(set, CodeSet::parse("error: #", r"\berror: (?:408|52[0-4])\b").unwrap());
        assert!(set.fits("API Error: 522 upstream", 4, 14) && !set.fits("API Error: 403 no", 4, 14));
        assert!(!set.fits("xerror: 522", 1, 11) && !set.fits("error: 522x", 0, 10), "word bounds");
        let bracket = CodeSet::parse("[#]:", "(?:503)").unwrap();
        assert_eq!(bracket, CodeSet::parse("[#]:", r"\[(?:503)\]:").unwrap());
        assert!(bracket.fits("error [503]: dropped", 6, 12));
        assert!(CodeSet::parse("error: #", "(?:a|(?:b))").is_none(), "a nested group is an expression");
    }

    /// The status phrases of the shipped tables take this path: a shape that
    /// names status codes after a marker's `#` and is not a code set would
    /// cost a regular expression over its line on every status it meets.
    #[test]
    fn shipped_status_shapes_are_code_sets() {
        let markers = crate::markers::parse(crate::markers::MARKERS_JSONL).unwrap();
        let slow: Vec<String> = markers
            .iter()
            .filter(|m| m.marker.contains('#'))
            .filter_map(|m| m.shape.as_deref().map(|s| (m, s)))
            .filter(|(_, s)| s.contains("(?:408") || s.contains("(?:40") || s.contains("(?:5"))
            .filter(|(m, s)| CodeSet::parse(&m.marker, s).is_none())
            .map(|(m, s)| format!("{} {s}", m.marker))
            .collect();
        assert!(slow.is_empty(), "status shapes that are no code set: {slow:?}");
    }

    #[test]
    fn other_shapes_stay_expressions() {
        assert_eq!(CodeSet::parse("status: #", r"status:\s*(?:503)\b"), None, "an escape that is no literal");
        assert_eq!(CodeSet::parse("tests: #", r"^\s*tests:\s+\d+ failed"), None);
        assert_eq!(CodeSet::parse("error: #", r"\berror: (?:5\d\d)\b"), None, "a class that is no digit range");
        assert_eq!(CodeSet::parse("error: #", r"\bfailure: (?:503)\b"), None, "another text than the marker's");
        assert_eq!(CodeSet::parse("connection refused", r"localhost"), None, "no digits");
    }
}
