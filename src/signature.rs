//! Failure signatures: what the identical-failure breaker compares.
//!
//! A signature is one line of the failure detail, normalised so that the same
//! fault gives the same text on every run and a different fault a different
//! text. The definition below is the contract documented on `signature` in
//! `wit/policy.wit`; keep the two identical.
//!
//! 1. **Bounded head.** Only the first [`HEAD_BYTES`] bytes (cut on a char
//!    boundary) and, of those, the first [`HEAD_LINES`] lines are read. Lines
//!    end at `\n` or `\r` (so a `\r`-redrawn progress bar is several lines).
//! 2. **Cleaning.** ANSI escape sequences (CSI, OSC, two-byte) are removed,
//!    other control characters become spaces, the line is trimmed, and a
//!    leading log prefix is removed: up to two timestamps (ISO 8601 date or
//!    date-time, `YYYY/MM/DD hh:mm:ss`, `hh:mm:ss[.fff]`, or a bracketed
//!    number such as dmesg's `[12345.678901]`), each optionally in brackets
//!    and followed by a `:` / `|` / ` - ` separator.
//! 3. **Noise** (never a signature line): a line with no letter (blank lines,
//!    pure separators, numbers, timestamp-only lines); a decorated header, i.e.
//!    a line that starts and ends with three or more of `= - _ * # ~ +`
//!    (`==== FAILURES ====`, `---- t stdout ----`); a progress or banner line,
//!    whose first word is one of [`PROGRESS_WORDS`] (any case: `Compiling`,
//!    `Downloading`, `Running`, `Finished`, `Traceback`, ...), which starts
//!    with `=== RUN` / `=== PAUSE` / `=== CONT` / `=== NAME`, or which ends in
//!    a percentage in brackets (`[ 42%]`); a quoted source line or command
//!    echo, i.e. `>` followed by whitespace (pytest's `>   assert x`, a jest
//!    code frame, an npm script banner); a runner's status line, i.e. the
//!    word `FAIL` or `PASS` followed by at most two words (`FAIL ./a.test.js`,
//!    `FAIL example.com/m 0.01s`).
//! 4. **Meaningful line.** Of the non-noise lines, the first *error line*: one
//!    that contains one of [`ERROR_WORDS`] (ASCII case-insensitive substring:
//!    `error`, `fail`, `fatal`, `panic`, `exception`, `cannot`, `not found`,
//!    ..., or a test runner's failure mark `✕` `✖` `✗` `✘`) where a word
//!    starts (not after a letter, digit or `_`, except a lower-case letter
//!    before an upper-case start as in `NameError`) and not followed by `_`
//!    (so `handle_error(x)` and `undefined_name` are not error words), and
//!    that does not start with `warning`, `note:`, `help:`, `hint:`,
//!    `= note` or `= help`. When there is none, the first non-noise line.
//!    When there is no non-noise line, the body is empty.
//! 5. **Normalisation** of that line (its first [`MAX_LINE`] bytes): UUIDs
//!    become `<uuid>`; dates and date-times (`2024-05-01`,
//!    `2024-05-01T12:34:56.789Z`, `2024/05/01 12:34:56`) become `<time>`;
//!    temporary paths (from `/tmp/`, `/var/tmp/`, `/var/folders/`,
//!    `/private/var/folders/`, `/dev/shm/`, or a Windows `...\Temp\`, up to
//!    the next space, quote, colon, comma, semicolon or bracket) become
//!    `<tmp>`. Then every word (a run of ASCII letters, digits and `_`) is
//!    read: `0x` followed by hex digits is `<hex>`; seven or more hex digits
//!    containing at least one digit (hashes, ids, bare addresses, and decimal
//!    numbers of seven or more digits) is `<hex>`; a word that starts with a
//!    digit has its leading digits replaced by `<n>` (`12` → `<n>`, `0.52s` →
//!    `<n>.<n>s`, so `file:12:5` → `file:<n>:<n>`); a word that starts with a
//!    letter or `_` is kept (`E0425`, `TS2304`, `x86_64`). Runs of whitespace
//!    become one space; the ends are trimmed.
//! 6. **Check.** When a check name is given (trimmed, control characters and
//!    whitespace runs as one space, at most [`MAX_CHECK`] bytes, non-empty),
//!    the signature is `check: body`.
//! 7. **Cut.** The signature is cut to [`MAX_SIGNATURE`] bytes on a char
//!    boundary, then trailing spaces are trimmed.

use std::sync::LazyLock;

use regex_lite::Regex;

use crate::automaton::{self, Automaton};
use crate::text::head;

/// The signature is cut to this many bytes.
pub const MAX_SIGNATURE: usize = 200;
/// Only this many bytes of the detail are read.
pub const HEAD_BYTES: usize = 64 * 1024;
/// Only this many lines of the head are read.
pub const HEAD_LINES: usize = 2_000;
/// The chosen line is normalised from at most this many bytes.
pub const MAX_LINE: usize = 4_096;
/// A check name is cut to this many bytes.
pub const MAX_CHECK: usize = 64;

/// First words (compared ASCII case-insensitively, a trailing `:` ignored)
/// of progress and banner lines.
pub const PROGRESS_WORDS: &[&str] = &[
    "adding",
    "blocking",
    "building",
    "cachedir",
    "checking",
    "cloning",
    "collected",
    "collecting",
    "compiling",
    "compressing",
    "configfile",
    "counting",
    "documenting",
    "downloaded",
    "downloading",
    "enumerating",
    "fetching",
    "finished",
    "fresh",
    "installed",
    "installing",
    "locking",
    "packaging",
    "platform",
    "plugins",
    "preparing",
    "receiving",
    "removing",
    "resolving",
    "rootdir",
    "running",
    "traceback",
    "unpacking",
    "updating",
    "verifying",
];

/// Substrings (ASCII case-insensitive) that make a line an error line.
pub const ERROR_WORDS: &[&str] = &[
    "error",
    "fail",
    "fatal",
    "panic",
    "exception",
    "abort",
    "assert",
    "segmentation fault",
    "segfault",
    "sigsegv",
    "sigbus",
    "sigabrt",
    "core dumped",
    "cannot",
    "can't",
    "could not",
    "couldn't",
    "unable to",
    "not found",
    "no such",
    "not defined",
    "undefined",
    "unresolved",
    "denied",
    "refused",
    "timed out",
    "killed",
    "\u{2715}",
    "\u{2716}",
    "\u{2717}",
    "\u{2718}",
];

/// Line starts (ASCII case-insensitive) that are never error lines.
const NOT_ERROR_STARTS: &[&str] = &["warning", "note:", "help:", "hint:", "= note", "= help"];

const DATE_TIME: &str = r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:[.,][0-9]+)?)?(?:Z|[+-][0-9]{2}:?[0-9]{2}|\s?UTC)?)?|[0-9]{4}/[0-9]{2}/[0-9]{2}(?: [0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:[.,][0-9]+)?)?)?";

static ANSI: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])").unwrap());

static LOG_PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^[\[(]?\s*(?:{DATE_TIME}|[0-9]{{2}}:[0-9]{{2}}:[0-9]{{2}}(?:[.,][0-9]+)?|\[\s*[0-9]+(?:\.[0-9]+)?\s*\])\s*[\])]?(?:\s*[:|]\s*|\s+-\s+|\s+|$)"
    ))
    .unwrap()
});

static UUID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b").unwrap()
});

static TIME: LazyLock<Regex> = LazyLock::new(|| Regex::new(&format!(r"\b(?:{DATE_TIME})\b")).unwrap());

static TMP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(^|[\s'"`=(\[{<:,])((?:/private)?/var/folders/|(?:/var)?/tmp/|/dev/shm/|[A-Za-z]:\\(?:[^\s'"`:;,()\[\]{}<>\\]+\\)*(?i:temp)\\)[^\s'"`:;,()\[\]{}<>]*"#,
    )
    .unwrap()
});

static PROGRESS_PCT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\[\s*[0-9]{1,3}%\]$").unwrap());

/// The error words in the marker tables' own automaton, which finds them in
/// any ASCII case: the component then carries no second searcher (the
/// aho-corasick crate's search and prefilter code, 42 KB of the component
/// when this was measured).
static ERRORS: LazyLock<Automaton> = LazyLock::new(|| {
    let words: Vec<&[u8]> = ERROR_WORDS.iter().map(|w| w.as_bytes()).collect();
    automaton::build(&words).expect("the error words build")
});

/// The signature of a failure detail (see the module documentation).
pub fn signature(detail: &str, check: Option<&str>) -> String {
    let body = normalise(&meaningful_line(detail));
    let check = check.map(clean_check).filter(|c| !c.is_empty());
    let full = match check {
        Some(c) => format!("{c}: {body}"),
        None => body,
    };
    head(&full, MAX_SIGNATURE).trim_end().to_string()
}

/// The chosen line of the detail, cleaned but not yet normalised; empty when
/// every line read is noise.
pub fn meaningful_line(detail: &str) -> String {
    let mut first: Option<String> = None;
    for raw in head(detail, HEAD_BYTES).split(['\n', '\r']).take(HEAD_LINES) {
        let line = clean(raw);
        if is_noise(&line) {
            continue;
        }
        if is_error_line(&line) {
            return line;
        }
        if first.is_none() {
            first = Some(line);
        }
    }
    first.unwrap_or_default()
}

/// ANSI escapes removed, control characters as spaces, trimmed, log prefix removed.
fn clean(raw: &str) -> String {
    let raw = head(raw, MAX_LINE);
    let no_ansi = if raw.contains('\x1b') { ANSI.replace_all(raw, "") } else { raw.into() };
    let text: String = no_ansi.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let mut line = text.trim();
    for _ in 0..2 {
        // A log prefix opens with a digit or a bracket; most lines have none.
        if !line.trim_start_matches(['[', '(']).trim_start().starts_with(|c: char| c.is_ascii_digit() || c == '[') {
            break;
        }
        match LOG_PREFIX.find(line) {
            Some(m) if m.end() > 0 => line = line[m.end()..].trim_start(),
            _ => break,
        }
    }
    line.to_string()
}

fn is_separator(c: char) -> bool {
    matches!(c, '=' | '-' | '_' | '*' | '#' | '~' | '+')
}

fn is_noise(line: &str) -> bool {
    if !line.chars().any(char::is_alphabetic) {
        return true;
    }
    let lead = line.chars().take_while(|&c| is_separator(c)).count();
    let tail = line.chars().rev().take_while(|&c| is_separator(c)).count();
    if lead >= 3 && tail >= 3 {
        return true;
    }
    let lower = head(line, 32).to_ascii_lowercase();
    if ["=== run", "=== pause", "=== cont", "=== name"].iter().any(|p| lower.starts_with(p)) {
        return true;
    }
    let first = lower.split_whitespace().next().unwrap_or("").trim_end_matches(':');
    if PROGRESS_WORDS.contains(&first) {
        return true;
    }
    // A quoted source line or command echo: pytest's `>       assert ...`,
    // a jest code frame `> 3 | ...`, an npm script banner `> app@1.0.0 test`.
    if line.starts_with('>') && line[1..].starts_with(char::is_whitespace) {
        return true;
    }
    // A runner's per-file or per-package status line (`FAIL ./a.test.js`,
    // `FAIL\texample.com/m\t0.01s`): the failure itself has its own line.
    let mut words = line.split_whitespace();
    if matches!(words.next(), Some("FAIL" | "PASS")) && words.count() <= 2 {
        return true;
    }
    line.ends_with("%]") && PROGRESS_PCT.is_match(line)
}

fn is_error_line(line: &str) -> bool {
    let lower = head(line, 16).to_ascii_lowercase();
    if NOT_ERROR_STARTS.iter().any(|p| lower.starts_with(p)) {
        return false;
    }
    let b = line.as_bytes();
    let mut found = false;
    ERRORS.scan(b, |_, start, end| {
        found = found || !b[start].is_ascii_alphabetic() || {
            let before = start == 0 || {
                let p = b[start - 1];
                !is_word_byte(p) || (p.is_ascii_lowercase() && b[start].is_ascii_uppercase())
            };
            before && b.get(end) != Some(&b'_')
        };
    });
    found
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Placeholders for run-specific parts, whitespace collapsed.
fn normalise(line: &str) -> String {
    let line = head(line, MAX_LINE);
    // Each pattern runs only where its fixed part is present: the same result
    // at a fraction of the cost (a breaker may hash 100,000 details in a call).
    let mut s: std::borrow::Cow<str> = line.into();
    if has_run(&s, 8, b"-", u8::is_ascii_hexdigit) {
        s = UUID.replace_all(&s, "<uuid>").into_owned().into();
    }
    if has_run(&s, 4, b"-/", u8::is_ascii_digit) {
        s = TIME.replace_all(&s, "<time>").into_owned().into();
    }
    if ["/tmp/", "/var/folders/", "/dev/shm/", ":\\"].iter().any(|p| s.contains(p)) {
        s = TMP.replace_all(&s, "${1}<tmp>").into_owned().into();
    }
    let s: &str = &s;
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if is_word_byte(b) {
            let start = i;
            while i < bytes.len() && is_word_byte(bytes[i]) {
                i += 1;
            }
            word(&s[start..i], &mut out);
            continue;
        }
        // Not an ASCII word byte: take the whole char.
        let ch = s[i..].chars().next().unwrap_or(' ');
        i += ch.len_utf8();
        if ch.is_whitespace() {
            if !out.is_empty() && !out.ends_with(' ') {
                out.push(' ');
            }
        } else {
            out.push(ch);
        }
    }
    out.trim_end().to_string()
}

/// Whether `s` holds `n` bytes of `class` followed by one of `then`.
fn has_run(s: &str, n: usize, then: &[u8], class: fn(&u8) -> bool) -> bool {
    s.as_bytes().windows(n + 1).any(|w| then.contains(&w[n]) && w[..n].iter().all(class))
}

fn word(w: &str, out: &mut String) {
    let b = w.as_bytes();
    let is_hex = |x: &[u8]| !x.is_empty() && x.iter().all(u8::is_ascii_hexdigit);
    let prefixed = b.len() > 2 && b[0] == b'0' && (b[1] == b'x' || b[1] == b'X') && is_hex(&b[2..]);
    let long_id = b.len() >= 7 && is_hex(b) && b.iter().any(u8::is_ascii_digit);
    if prefixed || long_id {
        out.push_str("<hex>");
    } else if b[0].is_ascii_digit() {
        let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
        out.push_str("<n>");
        out.push_str(&w[digits..]);
    } else {
        out.push_str(w);
    }
}

fn clean_check(c: &str) -> String {
    let mut out = String::new();
    for part in c.split(|ch: char| ch.is_whitespace() || ch.is_control()).filter(|p| !p.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(part);
        if out.len() >= MAX_CHECK {
            break;
        }
    }
    head(&out, MAX_CHECK).trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rustc_error_at_other_lines_is_the_same() {
        let a = "   Compiling demo v0.1.0 (/home/u/demo)\nerror[E0425]: cannot find value `x` in this scope\n --> src/main.rs:3:13\n";
        let b = "   Compiling demo v0.1.0 (/home/u/demo)\nerror[E0425]: cannot find value `x` in this scope\n --> src/main.rs:17:9\n";
        assert_eq!(signature(a, None), "error[E0425]: cannot find value `x` in this scope");
        assert_eq!(signature(a, None), signature(b, None));
    }

    #[test]
    fn error_codes_are_kept_so_other_faults_differ() {
        let a = signature("error[E0425]: cannot find value `x` in this scope", None);
        let b = signature("error[E0433]: failed to resolve: use of undeclared type `Foo`", None);
        assert_ne!(a, b);
        assert!(a.contains("E0425"), "{a}");
    }

    #[test]
    fn numbers_and_hex_become_placeholders() {
        assert_eq!(
            signature("panic at 0x7ffd5c3b2a10 after 12 tries in 0.52s, id a1b2c3d4e5f6", None),
            "panic at <hex> after <n> tries in <n>.<n>s, id <hex>"
        );
    }

    #[test]
    fn progress_warning_and_noise_lines_are_skipped() {
        let d = "\x1b[1m\x1b[32m   Compiling\x1b[0m x v0.1.0\n\n=====\n2024-05-01T12:34:56Z\nwarning: unused import: `std::error::Error`\nerror: expected one of `;` or `}`, found `let`\n";
        assert_eq!(signature(d, None), "error: expected one of `;` or `}`, found `let`");
    }

    #[test]
    fn without_an_error_line_the_first_meaningful_line_is_used() {
        assert_eq!(signature("\n  ---- \n  Add(1, 2) = 4; want 3\nmore\n", None), "Add(<n>, <n>) = <n>; want <n>");
    }

    #[test]
    fn log_prefix_timestamps_are_removed() {
        let a = signature(
            "2024-05-01T12:34:56.789Z [worker-3] fatal: could not create work tree dir 'w': File exists",
            None,
        );
        let b = signature(
            "[2024-06-11 08:00:01,002] [worker-7] fatal: could not create work tree dir 'w': File exists",
            None,
        );
        assert_eq!(a, b);
        assert!(a.starts_with("[worker-<n>] fatal"), "{a}");
    }

    #[test]
    fn uuids_temp_paths_and_dates_are_normalised() {
        let a = signature(
            "error: lock held by 123e4567-e89b-12d3-a456-426614174000 on /tmp/.tmpA1b2Zq/lock since 2024-05-01 12:00",
            None,
        );
        let b = signature(
            "error: lock held by 9f1c2d3e-0000-4aaa-8bbb-cccccccccccc on /tmp/.tmpQQx9/lock since 2025-01-31 23:59",
            None,
        );
        assert_eq!(a, b);
        assert_eq!(a, "error: lock held by <uuid> on <tmp> since <time>");
        assert_eq!(
            signature("error: at C:\\Users\\bob\\AppData\\Local\\Temp\\xyz12\\a.txt: denied", None),
            "error: at <tmp>: denied"
        );
        assert_eq!(signature("error: /home/u/tmp/x missing", None), "error: /home/u/tmp/x missing");
    }

    #[test]
    fn check_leads_and_is_bounded() {
        assert_eq!(signature("Error: 3 lint problems", Some(" ci / lint ")), "ci / lint: Error: <n> lint problems");
        assert_eq!(signature("x failed", Some("   ")), "x failed");
        let long = "c".repeat(500);
        let s = signature("x failed", Some(&long));
        assert_eq!(s, format!("{}: x failed", "c".repeat(MAX_CHECK)));
    }

    #[test]
    fn cut_is_char_boundary_safe_and_bounded() {
        let d = format!("error: {}", "é".repeat(300));
        let s = signature(&d, None);
        assert!(s.len() <= MAX_SIGNATURE && s.len() >= MAX_SIGNATURE - 1, "{}", s.len());
        let d = format!("error: {}", "é ".repeat(3000));
        assert!(signature(&d, Some("check")).len() <= MAX_SIGNATURE);
    }

    #[test]
    fn only_a_bounded_head_is_read() {
        // The error line lies past HEAD_BYTES: it is not read.
        let filler = "x\n".repeat(HEAD_BYTES / 2 + 10);
        let d = format!("{filler}error: late");
        assert_eq!(signature(&d, None), "x");
        // Past HEAD_LINES but within HEAD_BYTES: also not read.
        let d = format!("{}error: late", "y\n".repeat(HEAD_LINES));
        assert_eq!(signature(&d, None), "y");
        // A 16 MiB single line is cut, not scanned whole.
        let big = "a".repeat(16 * 1024 * 1024);
        assert_eq!(signature(&big, None).len(), MAX_SIGNATURE);
    }

    #[test]
    fn empty_or_noise_only_detail_gives_empty_body() {
        assert_eq!(signature("", None), "");
        assert_eq!(signature("\n=====\n12345\n   Compiling x v1\n", None), "");
        assert_eq!(signature("", Some("lint")), "lint:");
    }

    #[test]
    fn error_words_inside_identifiers_do_not_count() {
        let d = "  File \"s.py\", line 5, in main\n    return handle_error(undefined_name)\nNameError: name 'undefined_name' is not defined";
        assert_eq!(signature(d, None), "NameError: name 'undefined_name' is not defined");
        assert!(is_error_line("thread 'main' panicked at src/main.rs:3:5"));
        assert!(!is_error_line("let error_count = on_failure_hook();"));
        assert!(is_error_line("TypeError: x is not a function"));
    }

    #[test]
    fn source_echo_and_runner_status_lines_are_noise() {
        let d = "> app@1.0.0 test\n> jest --ci\n\nFAIL ./sum.test.js\n  \u{2715} adds numbers (8 ms)\n";
        assert_eq!(signature(d, None), "\u{2715} adds numbers (<n> ms)");
        let d = ">       assert add(1, 2) == 3\nE       assert 4 == 3";
        assert_eq!(signature(d, None), "E assert <n> == <n>");
    }

    #[test]
    fn go_test_failure_names_the_test() {
        let d = "=== RUN   TestAdd\n    add_test.go:12: Add(1, 2) = 4; want 3\n--- FAIL: TestAdd (0.00s)\nFAIL\nFAIL\texample.com/m\t0.002s\n";
        assert_eq!(signature(d, None), "--- FAIL: TestAdd (<n>.<n>s)");
    }
}
