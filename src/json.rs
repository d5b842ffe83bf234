//! The JSON functions: the documented JSON shape (the vectors', the CLI's and
//! `backstop serve`'s) in and out as text, read and written by the core's own
//! serde model (`model.rs`), so that a host needs no conversion of its own.
//!
//! Input is parsed by the model's serde rules, and a value that does not fit
//! the shape is refused naming its JSON path (found by `jsonpath.rs` where
//! serde_json stopped): `invalid-config` when the path
//! lies under a configuration, else `invalid-input`. Paths are those of the
//! core's own errors: a state's fields by their own names
//! (`situation.step_failed.attempt`, `config.transport.max_attempts`), the
//! other arguments' under the argument's name (`evidence.steps[0].exit_code`,
//! `config.classify.markers[0].match`). Output is compact JSON with the keys
//! in the order of the model's fields: a decision's text is its record
//! (`record_json`).

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::jsonpath::{refused_path, Step};
use crate::model::{Classification, Config, Evidence, PolicyError, State};

/// The most bytes of JSON one argument may hold (16 MiB); a longer one is
/// refused naming the argument.
pub const MAX_JSON_BYTES: usize = 16 << 20;

/// An argument of a JSON function: what its errors are called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arg {
    Evidence,
    Config,
    State,
}

impl Arg {
    fn name(self) -> &'static str {
        match self {
            Arg::Evidence => "evidence",
            Arg::Config => "config",
            Arg::State => "state",
        }
    }
}

/// A refusal as the JSON functions give it: the policy error as JSON text,
/// `{"invalid_input": {"field": ..., "rule": ...}}`.
pub fn error_json(e: &PolicyError) -> String {
    serde_json::to_string(e).expect("a policy error is two strings")
}

/// `classify` of an evidence object written as JSON; the classification as JSON.
pub fn classify_json(evidence: &str) -> Result<String, PolicyError> {
    let evidence: Evidence = parse(evidence, Arg::Evidence)?;
    Ok(write_classification(crate::classify(&evidence)))
}

/// `classify-with` of an evidence object and a configuration written as JSON.
pub fn classify_with_json(evidence: &str, config: &str) -> Result<String, PolicyError> {
    let evidence: Evidence = parse(evidence, Arg::Evidence)?;
    let config: Config = parse(config, Arg::Config)?;
    crate::classify_with_config(&evidence, &config).map(write_classification)
}

/// `next-action` of a state written as JSON; the decision record as JSON.
pub fn next_action_json(state: &str) -> Result<String, PolicyError> {
    let state: State = parse(state, Arg::State)?;
    crate::next_action(&state).map(|d| d.record_json)
}

/// The default configuration as JSON.
pub fn default_config_json() -> String {
    write(&crate::default_config())
}

/// `info` as JSON.
pub fn info_json() -> String {
    write(&crate::info())
}

/// Writes `value` as compact JSON in ASCII: a character outside ASCII (the
/// echo's `…`, the reasoning's `—`, a log's own text) is written as a `\u`
/// escape, a pair of them above U+FFFF. The value read back is the same;
/// what changes is the cost of reading it: a JavaScript host decodes an
/// ASCII answer and parses it in about half the time it takes for one with a
/// single character outside ASCII (measured with Node 20 on the benchmark's
/// 2 KiB answer: 2.5 µs against 5; not measured for Python). The decision
/// record (`next_action_json`) is left as it is written.
fn write<T: Serialize>(value: &T) -> String {
    let mut out = Vec::with_capacity(256);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, Ascii);
    // The model's types have string keys and no fallible serializer: this cannot fail.
    if value.serialize(&mut ser).is_err() {
        return "null".to_string();
    }
    String::from_utf8(out).unwrap_or_else(|_| "null".to_string())
}

/// A classification as JSON: the model writes every field as `write` does,
/// but the echo of the evidence (`evidence`, 2,000 bytes by default and most
/// of the answer) is left empty for it and put in place afterwards, escaped
/// by `push_escaped`. serde_json tests a string for a character to escape
/// one byte at a time, and in the component that was 14-20 % of a 2 KiB
/// call: from the Rust host, `classify-json` took 1.50 times the typed call
/// with serde_json's scan, 1.20-1.29 times with this, and 1.15-1.21 times
/// with no echo at all (alternating batches, one build each).
fn write_classification(mut c: Classification) -> String {
    const EMPTY_ECHO: &str = "\"evidence\":\"\"";
    let echo = std::mem::take(&mut c.evidence);
    let out = write(&c);
    // The key is found once: in a JSON text a `"` inside a string is
    // escaped, and one that ends a string is followed by `,` `:` `}` or `]`.
    match out.find(EMPTY_ECHO) {
        Some(at) if !echo.is_empty() => {
            // Written in place between the two halves, not escaped apart and inserted.
            let (head, tail) = out.split_at(at + EMPTY_ECHO.len() - 1);
            let mut answer = String::with_capacity(out.len() + echo.len() + echo.len() / 16);
            answer.push_str(head);
            push_escaped(&mut answer, &echo);
            answer.push_str(tail);
            answer
        }
        Some(_) => out,
        None => {
            // Unreachable while the model has the field; written the plain way.
            c.evidence = echo;
            write(&c)
        }
    }
}

/// Appends `text` as the contents of a JSON string, as `write` writes them:
/// serde_json's escapes for `"`, `\` and the control characters, and a `\u`
/// escape (a pair above U+FFFF) for each character outside ASCII.
/// Hand-written because serde_json's scan cannot be replaced from outside.
fn push_escaped(out: &mut String, text: &str) {
    let bytes = text.as_bytes();
    let mut run = 0;
    let mut i = next_special(bytes, 0);
    while i < bytes.len() {
        out.push_str(&text[run..i]);
        let b = bytes[i];
        let len = if b < 0x80 {
            match b {
                b'"' => out.push_str("\\\""),
                b'\\' => out.push_str("\\\\"),
                b'\n' => out.push_str("\\n"),
                b'\r' => out.push_str("\\r"),
                b'\t' => out.push_str("\\t"),
                0x08 => out.push_str("\\b"),
                0x0c => out.push_str("\\f"),
                _ => push_unit(out, u16::from(b)),
            }
            1
        } else {
            let c = text[i..].chars().next().unwrap_or('\u{fffd}');
            for unit in c.encode_utf16(&mut [0u16; 2]) {
                push_unit(out, *unit);
            }
            c.len_utf8()
        };
        run = i + len;
        i = next_special(bytes, run);
    }
    out.push_str(&text[run..]);
}

fn push_unit(out: &mut String, unit: u16) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push_str("\\u");
    for shift in [12, 8, 4, 0] {
        out.push(char::from(HEX[usize::from((unit >> shift) & 0xf)]));
    }
}

/// The index of the first byte from `from` on that a JSON string in ASCII
/// cannot hold as it is (`"`, `\`, below 0x20, above 0x7f), or the length.
/// Eight bytes at a time: a word with none of them is passed whole (the
/// zero-byte tests are exact for the word as a whole, which is all that is
/// asked of them; the byte is then found one at a time).
fn next_special(bytes: &[u8], from: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let special = |b: u8| b < 0x20 || b == b'"' || b == b'\\' || b >= 0x80;
    let mut i = from;
    while let Some(word) = bytes.get(i..i + 8) {
        let x = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        let quote = x ^ (ONES * u64::from(b'"'));
        let slash = x ^ (ONES * u64::from(b'\\'));
        let found = (x.wrapping_sub(ONES * 0x20) & !x)
            | (quote.wrapping_sub(ONES) & !quote)
            | (slash.wrapping_sub(ONES) & !slash)
            | x;
        if found & HIGH != 0 {
            break;
        }
        i += 8;
    }
    bytes[i..].iter().position(|&b| special(b)).map_or(bytes.len(), |p| i + p)
}

/// serde_json's compact formatter, with every character outside ASCII in a
/// string written as a `\u` escape.
struct Ascii;

impl serde_json::ser::Formatter for Ascii {
    fn write_string_fragment<W: ?Sized + std::io::Write>(&mut self, w: &mut W, fragment: &str) -> std::io::Result<()> {
        // Most fragments are all ASCII, and `is_ascii` reads a word at a
        // time where the search below reads a byte at a time: without this
        // test the 2 KiB answer took 1.8 times as long to write natively as
        // with serde_json's own formatter, and the component's
        // `classify-json` 2 µs more (21 µs).
        if fragment.is_ascii() {
            return w.write_all(fragment.as_bytes());
        }
        // A fragment holds no quote, backslash or control character (serde_json
        // escapes those between fragments), so `push_escaped` only writes its
        // characters outside ASCII as `\u` escapes: one escaper for both paths.
        let mut escaped = String::with_capacity(fragment.len() * 2);
        push_escaped(&mut escaped, fragment);
        w.write_all(escaped.as_bytes())
    }
}

/// Reads one argument: bounded, every value checked by the model's serde
/// rules, nothing but white space after the value.
fn parse<T: DeserializeOwned>(text: &str, arg: Arg) -> Result<T, PolicyError> {
    if text.len() > MAX_JSON_BYTES {
        let rule = format!("at most {MAX_JSON_BYTES} bytes of JSON, got {}", text.len());
        return Err(refuse(arg, arg.name().to_string(), rule));
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let value = T::deserialize(&mut de).map_err(|e| {
        let rule = e.to_string();
        let missing = rule.strip_prefix("missing field `").and_then(|r| r.split('`').next());
        refuse(arg, path(arg, &refused_path(text, &e), missing), rule)
    })?;
    de.end().map_err(|e| refuse(arg, arg.name().to_string(), e.to_string()))?;
    Ok(value)
}

/// The JSON path of a refused value, in the core's notation: `a.b[2].c`. A
/// missing field's path names the field.
fn path(arg: Arg, at: &[Step], missing: Option<&str>) -> String {
    let mut out = if arg == Arg::State { String::new() } else { arg.name().to_string() };
    for step in at {
        match step {
            Step::Index(index) => out.push_str(&format!("[{index}]")),
            Step::Key(key) => push_key(&mut out, key),
        }
    }
    if let Some(field) = missing {
        push_key(&mut out, field);
    }
    if out.is_empty() {
        out.push_str(arg.name());
    }
    out
}

fn push_key(out: &mut String, key: &str) {
    if !out.is_empty() {
        out.push('.');
    }
    out.push_str(key);
}

/// `invalid-config` for a value under a configuration, else `invalid-input`.
fn refuse(arg: Arg, field: String, rule: String) -> PolicyError {
    if arg == Arg::Config || field == "config" || field.starts_with("config.") {
        PolicyError::config(field, rule)
    } else {
        PolicyError::input(field, rule)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Decision;

    #[test]
    fn answers_are_ascii_and_read_back_as_written() {
        let text = "API Error: 529 Overloaded — retry… 😀 ünïcödé\nexit 1";
        let evidence = serde_json::json!({ "text": text, "exit_code": 1 }).to_string();
        let answer = classify_json(&evidence).unwrap();
        assert!(answer.is_ascii(), "{answer}");
        assert!(answer.contains("\\u2014") && answer.contains("\\ud83d\\ude00"), "{answer}");
        let read: crate::model::Classification = serde_json::from_str(&answer).unwrap();
        assert_eq!(read, crate::classify(&serde_json::from_str(&evidence).unwrap()));
        assert!(read.evidence.contains(text), "{}", read.evidence);
    }

    fn refused(r: Result<String, PolicyError>) -> (&'static str, String, String) {
        match r {
            Err(PolicyError::InvalidConfig(f)) => ("invalid_config", f.field, f.rule),
            Err(PolicyError::InvalidInput(f)) => ("invalid_input", f.field, f.rule),
            Ok(text) => panic!("accepted: {text}"),
        }
    }

    const STEP: &str = r#"{"now": 1790000000000, "entropy": 42, "situation": {"step_failed": {"attempt": 1,
        "evidence": {"steps": [{"id": "step-12", "status": "error", "stdout": "API Error: 529 Overloaded"}]}}}}"#;

    #[test]
    fn each_function_answers_as_the_typed_core_writes_it() {
        let ev = r#"{"text": "API Error: 529 Overloaded", "unknown": 1}"#;
        let typed = crate::classify(&Evidence::from_text("API Error: 529 Overloaded"));
        let read = |text: String| serde_json::from_str::<crate::model::Classification>(&text).unwrap();
        assert_eq!(read(classify_json(ev).unwrap()), typed);
        let state: State = serde_json::from_str(STEP).unwrap();
        let d = crate::next_action(&state).unwrap();
        let text = next_action_json(STEP).unwrap();
        assert_eq!(text, d.record_json);
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), serde_json::to_value(&d).unwrap());
        assert!(text.starts_with(r#"{"schema_version":1,"action":"retry","#), "{text}");
        let config: Config = serde_json::from_str(&default_config_json()).unwrap();
        assert_eq!(config, crate::default_config());
        assert_eq!(info_json(), serde_json::to_string(&crate::info()).unwrap());
        let with = classify_with_json(ev, r#"{"transport": {"max_attempts": 2}}"#).unwrap();
        assert_eq!(read(with), typed);
    }

    #[test]
    fn a_value_that_does_not_fit_is_refused_by_its_path() {
        let cases: &[(&str, &str, &str)] = &[
            (r#"{"situation": {"step_failed": {"attempt": -1}}}"#, "invalid_input", "situation.step_failed.attempt"),
            (
                r#"{"situation": {"step_failed": {"attempt": 1, "bogus": 1}}}"#,
                "invalid_input",
                "situation.step_failed.bogus",
            ),
            (
                r#"{"situation": {"step_failed": {"attempt": 1, "waited": "12x"}}}"#,
                "invalid_input",
                "situation.step_failed.waited",
            ),
            (r#"{"situation": {"step_failed": {"waited": -5}}}"#, "invalid_input", "situation.step_failed.waited"),
            (r#"{"situation": {"nope": {}}}"#, "invalid_input", "situation"),
            (r#"{"now": 1}"#, "invalid_input", "situation"),
            (
                r#"{"situation": {"step_failed": {"evidence": {"steps": [{}, {"exit_code": "1"}]}}}}"#,
                "invalid_input",
                "situation.step_failed.evidence.steps[1].exit_code",
            ),
            (
                r#"{"situation": {"work_failed": {"history": [{"at": 1}]}}}"#,
                "invalid_input",
                "situation.work_failed.history[0].kind",
            ),
            (
                r#"{"config": {"transport": {"max_attempts": "3"}}, "situation": {"cycle_entered": {}}}"#,
                "invalid_config",
                "config.transport.max_attempts",
            ),
            (
                r#"{"config": {"breakers": [{"same_failure": "exact"}]}, "situation": {"cycle_entered": {}}}"#,
                "invalid_config",
                "config.breakers[0].same_failure",
            ),
            (r#"{"config": 5, "situation": {"cycle_entered": {}}}"#, "invalid_config", "config"),
            (r#"{"situation": {"step_failed": {}}"#, "invalid_input", "state"),
            (r#"{"situation": {"cycle_entered": {}}} {}"#, "invalid_input", "state"),
            ("", "invalid_input", "state"),
            ("[]", "invalid_input", "state"),
        ];
        for (text, kind, field) in cases {
            let (k, f, rule) = refused(next_action_json(text));
            assert_eq!((k, f.as_str()), (*kind, *field), "{text}: {rule}");
            assert!(!rule.is_empty());
        }
        let (k, f, rule) = refused(classify_json(r#"{"steps": [{"exit_code": 1.5}]}"#));
        assert_eq!((k, f.as_str()), ("invalid_input", "evidence.steps[0].exit_code"), "{rule}");
        assert!(rule.contains("1.5"), "{rule}");
        let marker = r#"{"classify": {"markers": [{"class": "work", "marker": "x", "match": "glob"}]}}"#;
        let (k, f, _) = refused(classify_with_json("{}", marker));
        assert_eq!((k, f.as_str()), ("invalid_config", "config.classify.markers[0].match"));
        let (k, f, _) = refused(classify_with_json("{}", r#"{"classify": {"markers": [{"class": "work"}]}}"#));
        assert_eq!((k, f.as_str()), ("invalid_config", "config.classify.markers[0].marker"));
        let (k, f, _) = refused(classify_with_json("{", "{}"));
        assert_eq!((k, f.as_str()), ("invalid_input", "evidence"));
    }

    #[test]
    fn the_policy_refuses_as_the_typed_core_does() {
        let state = r#"{"config": {"transport": {"max_attempts": 11}}, "situation": {"step_failed": {"attempt": 1}}}"#;
        let (k, f, rule) = refused(next_action_json(state));
        assert_eq!((k, f.as_str(), rule.as_str()), ("invalid_config", "config.transport.max_attempts", "at most 10"));
        let (k, f, _) = refused(next_action_json(r#"{"situation": {"cycle_entered": {"count": 0}}}"#));
        assert_eq!((k, f.as_str()), ("invalid_input", "situation.cycle_entered.count"));
    }

    #[test]
    fn u64_is_read_from_a_number_or_a_decimal_string_and_written_as_a_number() {
        let state = STEP.replace("1790000000000", r#""1790000000000""#).replace("42", r#"" 18446744073709551615""#);
        let d: Decision = serde_json::from_str(&next_action_json(&state).unwrap()).unwrap();
        assert!(d.delay.is_some());
        let big = r#"{"headers": [{"name": "retry-after-ms", "value": "99999999999999999"}], "http_status": 503}"#;
        let text = classify_json(big).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(v["hints"][0]["after"].is_u64(), "{text}");
        let (_, f, _) =
            refused(next_action_json(r#"{"now": 18446744073709551616, "situation": {"cycle_entered": {}}}"#));
        assert_eq!(f, "now");
    }

    #[test]
    fn an_argument_over_the_bound_is_refused_naming_it_and_deep_nesting_is_no_crash() {
        let long = format!(r#"{{"text": "{}"}}"#, "x".repeat(MAX_JSON_BYTES));
        let (k, f, rule) = refused(classify_json(&long));
        assert_eq!((k, f.as_str()), ("invalid_input", "evidence"));
        assert!(rule.contains("16777216"), "{rule}");
        let (k, f, _) = refused(classify_with_json("{}", &format!(r#"{{"x": "{}"}}"#, "y".repeat(MAX_JSON_BYTES))));
        assert_eq!((k, f.as_str()), ("invalid_config", "config"));
        let at_bound = format!(r#"{{"text": "{}"}}"#, "x".repeat(MAX_JSON_BYTES - 12));
        assert_eq!(at_bound.len(), MAX_JSON_BYTES);
        assert!(classify_json(&at_bound).is_ok());
        // The model has no recursive type: deep nesting is either a value
        // evidence ignores (skipped without recursion) or a type error.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(classify_json(&format!(r#"{{"ignored": {deep}}}"#)).is_ok());
        let (_, f, rule) = refused(classify_json(&format!(r#"{{"steps": {deep}}}"#)));
        assert!(f.starts_with("evidence.steps[0]"), "{f}: {rule}");
    }

    /// The echo written by `push_escaped` is what serde_json writes through
    /// the `Ascii` formatter, for any text: quotes, backslashes, every
    /// control character, characters outside ASCII (pairs above U+FFFF),
    /// at every position in and across the eight-byte words.
    fn echo_as_serde_writes_it(echo: String) -> Result<(), proptest::test_runner::TestCaseError> {
        let evidence = Evidence { text: Some("HTTP 529 overloaded".into()), ..Evidence::default() };
        let mut c = crate::classify(&evidence);
        c.evidence = echo;
        let plain = write(&c);
        let fast = write_classification(c.clone());
        proptest::prop_assert_eq!(&fast, &plain);
        proptest::prop_assert!(fast.is_ascii());
        let read: Classification = serde_json::from_str(&fast).unwrap();
        proptest::prop_assert_eq!(read.evidence, c.evidence);
        Ok(())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        #[test]
        fn the_echo_is_written_as_serde_json_writes_it(
            echo in r#"([a-z \n\t\r"\\/\x00-\x1f\x7f]|é|…|😀|"evidence":""){0,80}"#,
        ) {
            echo_as_serde_writes_it(echo)?;
        }

        #[test]
        fn any_echo_is_written_as_serde_json_writes_it(echo in proptest::prelude::any::<String>()) {
            echo_as_serde_writes_it(echo)?;
        }
    }

    /// The scan passes a word of eight plain bytes whole and stops at the
    /// first byte to escape wherever it lies in a word, or at the end.
    #[test]
    fn next_special_finds_the_first_byte_to_escape() {
        for special in [b'"', b'\\', b'\n', 0x00, 0x1f, 0xc3] {
            for at in 0..20 {
                let mut bytes = vec![b'a'; 20];
                bytes[at] = special;
                assert_eq!(next_special(&bytes, 0), at, "{special:#x} at {at}");
                assert_eq!(next_special(&bytes, at + 1), 20, "{special:#x} at {at}: nothing after it");
            }
        }
        assert_eq!(
            next_special(b"~ !#[]\x7f", 0),
            7,
            "0x7f and the neighbours of the quote and backslash (! [ ]) need no escape"
        );
    }

    #[test]
    fn the_echo_of_a_real_answer_is_escaped_in_place() {
        let text = "step 3 \"build\" failed\n\tat C:\\work\\x…\u{1}\nAPI Error: 529 Overloaded";
        let answer = classify_json(&serde_json::json!({ "text": text }).to_string()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(v["evidence"], text);
        assert!(
            answer.contains(r#""evidence":"step 3 \"build\" failed\n\tat C:\\work\\x\u2026\u0001\nAPI"#),
            "{answer}"
        );
        // The answer's own text holds the key once (a parsed map could not show a second).
        assert_eq!(answer.matches(r#""evidence":"#).count(), 1, "{answer}");
    }
}
