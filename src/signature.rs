//! Failure signatures: what the identical-failure breaker compares.
//!
//! The signature of a detail is its first meaningful line, with hex addresses
//! and numbers replaced by placeholders and whitespace collapsed, led by
//! `check: ` when a check name is given.

/// The signature is cut to this many bytes.
pub const MAX_SIGNATURE: usize = 200;

pub fn signature(detail: &str, check: Option<&str>) -> String {
    let line = detail.lines().map(str::trim).find(|l| l.chars().any(char::is_alphabetic)).unwrap_or("");
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(ch) = chars.next() {
        if ch.is_ascii_digit() {
            while chars.peek().is_some_and(|c| c.is_ascii_alphanumeric()) {
                chars.next();
            }
            out.push('#');
        } else if ch.is_whitespace() {
            while chars.peek().is_some_and(|c| c.is_whitespace()) {
                chars.next();
            }
            out.push(' ');
        } else {
            out.push(ch);
        }
    }
    let body = crate::classify::head(out.trim(), MAX_SIGNATURE).to_string();
    match check.map(str::trim).filter(|c| !c.is_empty()) {
        Some(c) => format!("{c}: {body}"),
        None => body,
    }
}
