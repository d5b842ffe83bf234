//! Named patterns of the shipped marker tables: an expression that many
//! entries share is written once. A line
//! `{"pattern": NAME, "regex": RE, "source": ...}` of `markers/markers.jsonl`
//! defines `NAME`, and `(?&NAME)` in a later entry's `shape` or `unless`
//! stands for `(?:RE)`. The refusal rules use two: `local` (a loopback or
//! unspecified address) and `remote` (a named remote host).
//!
//! Only the shipped tables use them: an operator's marker carries its own
//! expressions (`markers::check` refuses a reference). The tables are
//! expanded when they are read (`markers::parse` and `build.rs`, which
//! includes this file), so every later reader sees plain expressions.
//!
//! Plain Rust, no I/O; it compiles both into the crate and into `build.rs`.

/// What opens a reference to a named pattern. `regex-lite` has no such
/// syntax, so a reference left unexpanded never compiles.
pub const OPEN: &str = "(?&";

/// Whether `name` may name a pattern: lower-case ASCII letters and `_`.
pub fn is_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
}

/// `expr` with each `(?&NAME)` replaced by `(?:RE)` for the pattern `NAME`
/// of `named`; an error names a reference that is not closed or not defined.
pub fn expand(expr: &str, named: &[(String, String)]) -> Result<String, String> {
    let mut out = String::with_capacity(expr.len());
    let mut rest = expr;
    while let Some(at) = rest.find(OPEN) {
        out.push_str(&rest[..at]);
        let after = &rest[at + OPEN.len()..];
        let end = after.find(')').ok_or_else(|| format!("`{OPEN}` without its `)` in {expr:?}"))?;
        let name = &after[..end];
        let Some((_, regex)) = named.iter().find(|(n, _)| n == name) else {
            return Err(format!("no pattern named {name:?} is defined on an earlier line"));
        };
        out.push_str("(?:");
        out.push_str(regex);
        out.push(')');
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named() -> Vec<(String, String)> {
        vec![("local".into(), r"\blocalhost\b|::1".into()), ("remote".into(), r"\.com\b".into())]
    }

    #[test]
    fn references_become_groups_of_their_patterns() {
        let e = expand(r"^x (?&remote)|(?&local) y", &named()).unwrap();
        assert_eq!(e, r"^x (?:\.com\b)|(?:\blocalhost\b|::1) y");
        assert_eq!(expand(r"\d{1,3}\.\d{1,3}", &named()).unwrap(), r"\d{1,3}\.\d{1,3}", "no reference, no change");
    }

    #[test]
    fn an_unknown_or_unclosed_reference_is_refused() {
        assert!(expand("(?&nowhere)", &named()).unwrap_err().contains("\"nowhere\""));
        assert!(expand("a (?&local", &named()).unwrap_err().contains("without its `)`"));
    }

    #[test]
    fn names_are_lower_case_words() {
        assert!(is_name("remote") && is_name("local_host"));
        assert!(!is_name("") && !is_name("Remote") && !is_name("a-b") && !is_name("a)"));
    }
}
