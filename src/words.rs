//! The words a failure's text is weighed by (`weigh.rs`): the same function
//! reads the labelled corpus when `build.rs` learns the weights and the
//! evidence when a call weighs it. Plain Rust, no I/O; it compiles both into
//! the crate and into `build.rs`.

/// Only the last this many bytes of the text are read: a failure states
/// itself at the end of its output.
pub const TAIL_BYTES: usize = 8192;
/// The longest word; a longer run (a hash, a path without separators) is no word.
pub const MAX_WORD: usize = 30;

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The distinct words of the last [`TAIL_BYTES`] of `text`, ASCII-lower-cased
/// and sorted. A word is a run of ASCII letters, digits and `_` without its
/// leading digits, of 2 to [`MAX_WORD`] bytes: `E0425` is `e0425`,
/// `404NotFound` is `notfound`, `12` is none.
pub fn words(text: &str) -> Vec<String> {
    let mut start = text.len().saturating_sub(TAIL_BYTES);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let bytes = &text.as_bytes()[start..];
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !is_word(bytes[i]) {
            i += 1;
            continue;
        }
        let from = i;
        while i < bytes.len() && is_word(bytes[i]) {
            i += 1;
        }
        let run = &bytes[from..i];
        let word = &run[run.iter().take_while(|b| b.is_ascii_digit()).count()..];
        if (2..=MAX_WORD).contains(&word.len()) {
            out.push(String::from_utf8(word.to_ascii_lowercase()).expect("ASCII"));
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}
