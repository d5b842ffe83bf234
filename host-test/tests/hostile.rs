//! Hostile input, through the component (wasmtime host) and through the CLI.
//! Each input gets a correct decision or an error that names the problem;
//! none panics, traps or hangs. Memory is bounded by the host's limiter (the
//! default 256 MiB, tighter where a test says so). No timings are asserted.

mod support;

use std::process::Output;
use std::sync::{Mutex, MutexGuard, OnceLock};

use support::{cli, file};

use backstop::model as m;
use backstop_host::{Backstop, HostError, Limits};
use serde_json::{json, Value};

const SEC: u64 = 1_000_000_000;
const MIN: u64 = 60 * SEC;
const HOUR: u64 = 60 * MIN;
const DAY: u64 = 24 * HOUR;
const MIB: usize = 1 << 20;
const NOW: u64 = 1_790_000_000_000;

/// One compiled component for the whole test binary (compiling is slow in debug).
fn component() -> MutexGuard<'static, Backstop> {
    static B: OnceLock<Mutex<Backstop>> = OnceLock::new();
    let guard = B
        .get_or_init(|| Mutex::new(Backstop::new().expect("the component loads")))
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    guard
}

/// Runs `f` on the shared component under `limits`, then restores the defaults.
fn with_limits<T>(limits: Limits, f: impl FnOnce(&mut Backstop) -> T) -> T {
    let mut b = component();
    b.set_limits(limits).expect("same metering");
    let out = f(&mut b);
    b.set_limits(Limits::default()).expect("same metering");
    out
}

fn state(config: m::Config, situation: m::Situation) -> m::State {
    m::State { now: NOW, entropy: 11, config, situation }
}

fn field_error(e: &m::PolicyError) -> (&'static str, &str, &str) {
    match e {
        m::PolicyError::InvalidConfig(f) => ("invalid_config", &f.field, &f.rule),
        m::PolicyError::InvalidInput(f) => ("invalid_input", &f.field, &f.rule),
    }
}

// ---------------------------------------------------------------- big evidence

/// 16 MiB of an ordinary build log with no marker in it, then `tail`.
fn sixteen_mib_then(tail: &str) -> String {
    let line = "2026-09-21T10:00:00Z worker-3 compiling module 0042 of 9000, cache warm, nothing to report\n";
    let mut s = String::with_capacity(16 * MIB + tail.len() + line.len());
    while s.len() < 16 * MIB {
        s.push_str(line);
    }
    s.push_str(tail);
    s
}

#[test]
fn evidence_of_16_mib_is_classified_by_its_tail_within_the_memory_limit() {
    let text = sixteen_mib_then("API Error: 529 Overloaded. This is a server-side issue, usually temporary.");
    assert!(text.len() > 16 * MIB);
    // Under the default limits (256 MiB of linear memory).
    let c = with_limits(Limits::default(), |b| b.classify(&m::Evidence::from_text(text.clone())))
        .expect("no trap, no limit hit");
    assert_eq!(c.class, m::FailureClass::TransientTransport, "{}", c.reasoning);
    assert_eq!(c.signal.as_deref(), Some("api error: 529"));
    assert!(c.evidence.len() < 4096, "the echo stays bounded: {} bytes", c.evidence.len());
    assert!(c.evidence.ends_with("usually temporary."), "{}", c.evidence);

    // Bounded: the whole call fits in 64 MiB, four times the input, so the
    // component holds the input about once and scans only its tail.
    let c = with_limits(Limits { memory_bytes: 64 * MIB, ..Limits::default() }, |b| {
        b.classify(&m::Evidence::from_text(text.clone()))
    })
    .expect("16 MiB of evidence fits in 64 MiB of linear memory");
    assert_eq!(c.class, m::FailureClass::TransientTransport);

    // The same in a failed step's stdout, as a whole next-action decision.
    let evidence = m::Evidence {
        steps: vec![m::StepReport {
            id: "step-12".into(),
            status: "error".into(),
            stdout: Some(text),
            exit_code: Some(1),
            ..Default::default()
        }],
        ..Default::default()
    };
    let s = state(
        m::Config::default(),
        m::Situation::StepFailed(m::StepFailure { evidence, attempt: 1, waited: 0, elapsed: 0 }),
    );
    let d = with_limits(Limits::default(), |b| b.next_action(&s)).expect("no trap").expect("a decision");
    assert_eq!(d.action, m::Action::Retry, "{}", d.reasoning);
    assert_eq!(d.failed_steps, vec!["step-12".to_string()]);
}

#[test]
fn evidence_beyond_the_memory_limit_is_a_named_limit_not_a_crash() {
    // 40 MiB of evidence cannot enter 32 MiB of linear memory: the host says
    // which limit, and the next call works on a fresh instance.
    let text = "y".repeat(40 * MIB);
    let r = with_limits(Limits { memory_bytes: 32 * MIB, ..Limits::default() }, |b| {
        let r = b.classify(&m::Evidence::from_text(text));
        let after = b.classify(&m::Evidence::from_text("read ECONNRESET"));
        (r, after)
    });
    match r.0 {
        Err(HostError::MemoryLimit { limit, requested }) => {
            assert_eq!(limit, 32 * MIB);
            assert!(requested > limit);
        }
        other => panic!("expected a memory-limit error, got {other:?}"),
    }
    assert_eq!(r.1.expect("a fresh instance answers").class, m::FailureClass::TransientTransport);
}

// ---------------------------------------------------------------- big history

fn failure(detail: &str) -> m::HistoryEvent {
    m::HistoryEvent {
        at: NOW,
        kind: m::EventKind::Failure,
        breaker: "build".into(),
        actor: "builder".into(),
        detail: detail.into(),
        check: None,
        diagnosis: None,
    }
}

fn work_failed(history: Vec<m::HistoryEvent>) -> m::State {
    state(
        m::Config::default(),
        m::Situation::WorkFailed(m::WorkFailure { breaker: "build".into(), actor: "builder".into(), history }),
    )
}

#[test]
fn a_history_of_100000_events_is_answered_through_the_component() {
    // 100,000 identical failures: the breaker trips and counts every one.
    let same = work_failed(vec![failure("error[E0425]: cannot find value `x` in this scope"); 100_000]);
    let d = with_limits(Limits::default(), |b| b.next_action(&same)).expect("no trap").expect("a decision");
    assert_eq!(d.action, m::Action::Block, "{}", d.reasoning);
    assert_eq!(d.circuit_breaker.as_ref().unwrap().count, 100_000);
    assert_eq!(d, backstop::next_action(&same).unwrap(), "the component agrees with the native core");

    // 100,000 failures of the same fault, each at another line (the signature
    // normalises the numbers, so every detail is hashed anew): still one count.
    let history: Vec<m::HistoryEvent> =
        (0..100_000).map(|i| failure(&format!("src/lib.rs:{}:{}: error: expected `;`", i + 1, i % 80))).collect();
    let moving = work_failed(history);
    let d = with_limits(Limits::default(), |b| b.next_action(&moving)).expect("no trap").expect("a decision");
    assert_eq!((d.action, d.attempt), (m::Action::Block, 100_000), "{}", d.reasoning);

    // Alternating faults: the count stops at the first change.
    let history: Vec<m::HistoryEvent> = (0..100_000)
        .map(|i| failure(if i % 2 == 0 { "error: disk full" } else { "error: linker `cc` not found" }))
        .collect();
    let d =
        with_limits(Limits::default(), |b| b.next_action(&work_failed(history))).expect("no trap").expect("a decision");
    assert_eq!((d.action, d.attempt), (m::Action::Proceed, 1), "{}", d.reasoning);
}

#[test]
fn a_history_beyond_100000_events_is_invalid_input_naming_it() {
    let s = work_failed(vec![failure("error: x"); 100_001]);
    let e = with_limits(Limits::default(), |b| b.next_action(&s)).expect("no trap").expect_err("refused");
    assert_eq!(field_error(&e), ("invalid_input", "situation.work_failed.history", "at most 100000 events"));

    let s = state(m::Config::default(), m::Situation::TaskFailed(m::TaskFailure { failures: vec![NOW; 100_001] }));
    let e = with_limits(Limits::default(), |b| b.next_action(&s)).expect("no trap").expect_err("refused");
    assert_eq!(field_error(&e).1, "situation.task_failed.failures");
    let s = state(m::Config::default(), m::Situation::TaskFailed(m::TaskFailure { failures: vec![NOW; 100_000] }));
    let d = with_limits(Limits::default(), |b| b.next_action(&s)).expect("no trap").expect("a decision");
    assert_eq!(d.action, m::Action::Block);
}

// ---------------------------------------------------------------- NUL and control bytes

#[test]
fn nul_and_control_characters_pass_through_the_component() {
    let text = "\0\0\u{1}\u{1b}[31mAPI Error: 529\0 Overloaded\u{7f}\0";
    let mut b = component();
    let c = b.classify(&m::Evidence::from_text(text)).expect("no trap");
    assert_eq!(c.class, m::FailureClass::TransientTransport);
    assert_eq!(c, backstop::classify(&m::Evidence::from_text(text)));

    let e = m::Evidence {
        steps: vec![m::StepReport {
            id: "\0step\0".into(),
            status: "\0".into(),
            stderr: Some("\0test result: FAILED.\0".into()),
            ..Default::default()
        }],
        error_code: Some("\0".into()),
        headers: vec![m::Header { name: "retry-after\0".into(), value: "\0".into() }],
        ..Default::default()
    };
    let c = b.classify(&e).expect("no trap");
    assert_eq!(c.class, m::FailureClass::Work);
    assert_eq!(c.failed_steps, vec!["\0step\0".to_string()]);

    let sig = b.signature("\0error: \0cannot find `x`\0", Some("\0lint\0")).expect("no trap");
    assert_eq!(sig, backstop::signature("\0error: \0cannot find `x`\0", Some("\0lint\0")));
    assert!(!sig.contains('\0'), "control characters are cleaned from a signature: {sig:?}");
}

// ---------------------------------------------------------------- configuration bounds

/// A configuration change: a JSON pointer into the config and its value.
type Set = (&'static str, Value);

struct Row {
    field: &'static str,
    /// Applied first (to keep a related bound out of the way).
    with: Vec<Set>,
    at: Vec<Value>,
    beyond: Vec<Value>,
}

fn row(field: &'static str, at: Vec<Value>, beyond: Vec<Value>) -> Row {
    Row { field, with: vec![], at, beyond }
}

fn commands(n: usize, len: usize) -> Value {
    json!(vec!["u".repeat(len); n])
}

fn breakers(n: usize) -> Value {
    let b = serde_json::to_value(&m::Config::default().breakers[0]).unwrap();
    Value::Array(
        (0..n)
            .map(|i| {
                let mut b = b.clone();
                b["kind"] = json!(format!("kind-{i}"));
                b
            })
            .collect(),
    )
}

fn operator_markers(n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| json!({"class": "work", "marker": format!("tool fault {i}"), "match": "word", "source": "s"}))
            .collect(),
    )
}

/// Every bound of `src/config.rs`: each field at its bounds (accepted) and
/// just beyond them (refused, naming the field).
fn table() -> Vec<Row> {
    vec![
        row("config.transport.max_attempts", vec![json!(1), json!(10)], vec![json!(0), json!(11)]),
        row("config.transport.budget", vec![json!(1_000_000), json!(DAY)], vec![json!(999_999), json!(DAY + 1)]),
        row(
            "config.transport.initial_delay",
            vec![json!(1_000_000), json!(HOUR)],
            vec![json!(999_999), json!(HOUR + 1)],
        ),
        row("config.transport.multiplier", vec![json!(1), json!(10)], vec![json!(0), json!(11)]),
        row("config.transport.hint_ceiling", vec![json!(SEC), json!(DAY)], vec![json!(SEC - 1), json!(DAY + 1)]),
        row(
            "config.transport.max_elapsed",
            vec![json!(0), json!(SEC), json!(7 * DAY)],
            vec![json!(1), json!(SEC - 1), json!(7 * DAY + 1)],
        ),
        row("config.evidence.scan_bytes", vec![json!(256), json!(16 * MIB)], vec![json!(255), json!(16 * MIB + 1)]),
        row("config.evidence.echo_bytes", vec![json!(0), json!(65_536)], vec![json!(65_537)]),
        row("config.resume.max_resumes", vec![json!(0), json!(100)], vec![json!(101)]),
        Row {
            field: "config.resume.base_delay",
            with: vec![("/resume/max_delay", json!(DAY))],
            at: vec![json!(SEC), json!(HOUR)],
            beyond: vec![json!(SEC - 1), json!(HOUR + 1)],
        },
        Row {
            field: "config.resume.max_delay",
            with: vec![("/resume/base_delay", json!(SEC))],
            at: vec![json!(SEC), json!(DAY)],
            beyond: vec![json!(SEC - 1), json!(DAY + 1)],
        },
        row("config.resume.quota_cap_percent", vec![json!(1), json!(100)], vec![json!(0), json!(101)]),
        row("config.resume.reset_margin", vec![json!(0), json!(HOUR)], vec![json!(HOUR + 1)]),
        row(
            "config.resume.max_reset_wait",
            vec![json!(MIN), json!(31 * DAY)],
            vec![json!(MIN - 1), json!(31 * DAY + 1)],
        ),
        row("config.breakers", vec![json!([]), breakers(32)], vec![breakers(33)]),
        row("config.classify.markers", vec![json!([]), operator_markers(64)], vec![operator_markers(65)]),
        row(
            "config.breakers[0].kind",
            vec![json!("b"), json!("k".repeat(64))],
            vec![json!(""), json!("  "), json!("k".repeat(65)), json!("window"), json!("cycle")],
        ),
        row("config.breakers[0].threshold", vec![json!(1), json!(100)], vec![json!(0), json!(101)]),
        row(
            "config.breakers[0].reset_on",
            vec![json!(["manual"]), json!(["cycle_reset", "reclassified", "manual"])],
            vec![json!([])],
        ),
        row(
            "config.breakers[0].look_at",
            vec![json!("x"), json!("l".repeat(1024))],
            vec![json!(""), json!(" \t"), json!("l".repeat(1025))],
        ),
        row(
            "config.breakers[0].unblock_commands",
            vec![commands(1, 1), commands(16, 1024)],
            vec![json!([]), json!([""]), commands(17, 1), commands(1, 1025)],
        ),
        row("config.window.window", vec![json!(SEC), json!(30 * DAY)], vec![json!(SEC - 1), json!(30 * DAY + 1)]),
        row("config.window.limit", vec![json!(1), json!(1000)], vec![json!(0), json!(1001)]),
        Row {
            field: "config.window.base_delay",
            with: vec![("/window/max_delay", json!(7 * DAY))],
            at: vec![json!(SEC), json!(DAY)],
            beyond: vec![json!(SEC - 1), json!(DAY + 1)],
        },
        Row {
            field: "config.window.max_delay",
            with: vec![("/window/base_delay", json!(SEC))],
            at: vec![json!(SEC), json!(7 * DAY)],
            beyond: vec![json!(SEC - 1), json!(7 * DAY + 1)],
        },
        row(
            "config.window.unblock_commands",
            vec![commands(1, 1), commands(16, 1024)],
            vec![json!([]), json!([" "]), commands(17, 1), commands(1, 1025)],
        ),
        row("config.cycle.max_cycles", vec![json!(1), json!(1000)], vec![json!(0), json!(1001)]),
        row(
            "config.cycle.unblock_commands",
            vec![commands(1, 1), commands(16, 1024)],
            vec![json!([]), json!([""]), commands(17, 1), commands(1, 1025)],
        ),
    ]
}

/// `config.breakers[0].kind` -> `/breakers/0/kind`.
fn pointer(field: &str) -> String {
    let rest = field.strip_prefix("config.").unwrap();
    let mut p = String::new();
    for part in rest.split('.') {
        match part.split_once('[') {
            Some((name, idx)) => {
                p.push('/');
                p.push_str(name);
                p.push('/');
                p.push_str(idx.trim_end_matches(']'));
            }
            None => {
                p.push('/');
                p.push_str(part);
            }
        }
    }
    p
}

fn config_with(sets: &[(String, Value)]) -> m::Config {
    let mut c = serde_json::to_value(m::Config::default()).unwrap();
    for (p, v) in sets {
        *c.pointer_mut(p).unwrap_or_else(|| panic!("no config field at {p}")) = v.clone();
    }
    serde_json::from_value(c).unwrap()
}

fn step_529(config: m::Config) -> m::State {
    state(
        config,
        m::Situation::StepFailed(m::StepFailure {
            evidence: m::Evidence::from_text("API Error: 529"),
            attempt: 1,
            waited: 0,
            elapsed: 0,
        }),
    )
}

#[test]
fn every_config_field_at_its_bounds_is_accepted_and_beyond_them_is_named() {
    let mut b = component();
    let mut checked = 0;
    for r in table() {
        let p = pointer(r.field);
        let with: Vec<(String, Value)> = r.with.iter().map(|(p, v)| (p.to_string(), v.clone())).collect();
        for v in &r.at {
            let mut sets = with.clone();
            sets.push((p.clone(), v.clone()));
            let s = step_529(config_with(&sets));
            let answer = b.next_action(&s).expect("no trap");
            assert!(answer.is_ok(), "{} = {} is within its bounds, got {:?}", r.field, v, answer);
            assert_eq!(answer, backstop::next_action(&s), "component and native agree");
            checked += 1;
        }
        for v in &r.beyond {
            let mut sets = with.clone();
            sets.push((p.clone(), v.clone()));
            let s = step_529(config_with(&sets));
            let e = b.next_action(&s).expect("no trap").expect_err(&format!("{} = {} is out of bounds", r.field, v));
            let (kind, field, rule) = field_error(&e);
            assert_eq!((kind, field), ("invalid_config", r.field), "{} = {}: {rule}", r.field, v);
            assert!(!rule.is_empty());
            assert_eq!(Err(e), backstop::next_action(&s), "component and native agree");
            checked += 1;
        }
    }
    assert!(checked >= 90, "{checked}");
}

#[test]
fn the_bounds_table_covers_every_config_field() {
    // A field added to the config without a row here fails this test.
    let c = serde_json::to_value(m::Config::default()).unwrap();
    let mut fields: Vec<String> = Vec::new();
    for (section, v) in c.as_object().unwrap() {
        match v {
            Value::Object(o) => fields.extend(o.keys().map(|k| format!("config.{section}.{k}"))),
            Value::Array(a) => {
                fields.push(format!("config.{section}"));
                fields.extend(a[0].as_object().unwrap().keys().map(|k| format!("config.{section}[0].{k}")));
            }
            _ => fields.push(format!("config.{section}")),
        }
    }
    let rows: Vec<&str> = table().iter().map(|r| r.field).collect();
    // Fields with no numeric or length bound: enums and a flag, any value of
    // their type is valid (an unknown value is a parse error, see the CLI test).
    let unbounded =
        ["config.transport.retry_bare_signals", "config.breakers[0].same_failure", "config.breakers[0].on_trip"];
    let missing: Vec<&String> =
        fields.iter().filter(|f| !rows.contains(&f.as_str()) && !unbounded.contains(&f.as_str())).collect();
    assert!(missing.is_empty(), "no bounds row for {missing:?}");
}

// ---------------------------------------------------------------- the CLI

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit 2, nothing on stdout, and a message naming the problem (no panic).
fn refused(o: &Output, names: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(o.stdout.is_empty(), "stdout: {}", String::from_utf8_lossy(&o.stdout));
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.starts_with("backstop: "), "{err}");
    for n in names {
        assert!(err.contains(n), "{err:?} does not name {n:?}");
    }
}

fn json_out(o: &Output) -> Value {
    assert!(o.status.success(), "exit {:?}: {}", o.status, stderr(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

#[test]
fn deeply_nested_json_is_refused_by_the_cli_with_exit_2() {
    // A sequence where the state's first field, `now` (a u64), is due:
    // refused at the second bracket, before any recursion.
    let deep_array = "[".repeat(100_000);
    refused(&cli(&["next-action"], deep_array.as_bytes()), &["state", "invalid type: sequence"]);
    // Deep nesting where a u64 is due (a number or a decimal string): refused
    // at the first bracket.
    let inner = format!("{}1{}", "[".repeat(5_000), "]".repeat(5_000));
    let state = format!(r#"{{"situation":{{"step_failed":{{"attempt":1,"waited":{inner}}}}}}}"#);
    refused(&cli(&["next-action"], state.as_bytes()), &["state", "expected an unsigned integer"]);
    // Deep nesting where a string is due: refused at the first bracket.
    let state = format!(r#"{{"situation":{{"step_failed":{{"attempt":1,"evidence":{{"text":{inner}}}}}}}}}"#);
    refused(&cli(&["next-action"], state.as_bytes()), &["state", "expected a string"]);
    let objects = format!("{}{}", r#"{"a":"#.repeat(50_000), "}".repeat(50_000));
    refused(&cli(&["next-action"], objects.as_bytes()), &["state"]);
    // One nested line among good ones in --jsonl: reported by line, the others answered.
    let input = format!("{{\"text\":\"read ECONNRESET\"}}\n{}\n{{\"text\":\"socket hang up\"}}\n", "[".repeat(10_000));
    let o = cli(&["classify", "--jsonl"], input.as_bytes());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let lines: Vec<Value> =
        String::from_utf8(o.stdout.clone()).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["class"], "transient_transport");
    assert!(lines[1]["error"].as_str().unwrap().starts_with("line 2: "), "{}", lines[1]);
    assert_eq!(lines[2]["class"], "transient_transport");
    assert!(stderr(&o).contains("1 malformed line(s); first: line 2"), "{}", stderr(&o));
}

#[test]
fn malformed_json_is_refused_by_the_cli_naming_the_problem() {
    let cases: [(&str, &[&str]); 12] = [
        ("", &["state", "EOF"]),
        ("{", &["state", "EOF"]),
        (r#"{"situation":"#, &["state", "EOF"]),
        (r#"{"situation":{"cycle_entered":{"name":"c","count":1}}} trailing"#, &["state", "trailing characters"]),
        (r#"{"now":1}"#, &["state", "missing field `situation`"]),
        (r#"{"situatoin":{}}"#, &["state", "unknown field `situatoin`"]),
        (r#"{"situation":{"step_exploded":{}}}"#, &["state", "unknown variant `step_exploded`"]),
        (r#"{"situation":{"step_failed":{"attempt":"one"}}}"#, &["state", "expected u32"]),
        (r#"{"situation":{"step_failed":{"attempt":1,"waited":-5}}}"#, &["state"]),
        (r#"{"situation":{"step_failed":{"attempt":99999999999}}}"#, &["state", "expected u32"]),
        (r#"{"now":"18446744073709551616","situation":{"cycle_entered":{"count":1}}}"#, &["state", "unsigned integer"]),
        (
            r#"{"config":{"evidence":{"echo_bytes":-1}},"situation":{"cycle_entered":{"count":1}}}"#,
            &["state", "expected u32"],
        ),
    ];
    for (input, names) in cases {
        refused(&cli(&["next-action"], input.as_bytes()), names);
    }
    // Unknown enum values in the configuration are named too.
    let s = r#"{"config":{"breakers":[{"kind":"b","same_failure":"vibes","threshold":2,"reset_on":["manual"],"look_at":"x","unblock_commands":["u"]}]},"situation":{"cycle_entered":{"count":1}}}"#;
    refused(&cli(&["next-action"], s.as_bytes()), &["unknown variant `vibes`"]);
    // A parsed state that breaks a bound: the field and the rule.
    let s = r#"{"config":{"transport":{"max_attempts":11}},"situation":{"cycle_entered":{"count":1}}}"#;
    refused(&cli(&["next-action"], s.as_bytes()), &["invalid config: config.transport.max_attempts: at most 10"]);
    let s = r#"{"situation":{"step_failed":{"attempt":0}}}"#;
    refused(&cli(&["next-action"], s.as_bytes()), &["invalid input: situation.step_failed.attempt"]);
}

#[test]
fn invalid_utf8_in_a_file_is_read_lossily_for_text_and_refused_for_json() {
    let mut bytes = vec![0xff, 0xfe, b'\n'];
    bytes.extend_from_slice(b"API Error: 529 Overloaded");
    bytes.extend_from_slice(&[0xc3, 0x28, 0xa0, 0xa1, b'\n', 0xf0, 0x90, 0x80]);
    let p = file("hostile-invalid-utf8.txt", &bytes);
    let v = json_out(&cli(&["classify", p.to_str().unwrap()], b""));
    assert_eq!(v["class"], "transient_transport");
    assert!(v["evidence"].as_str().unwrap().contains('\u{fffd}'), "{}", v["evidence"]);
    let o = cli(&["signature", p.to_str().unwrap()], b"");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8(o.stdout).unwrap().lines().count(), 1);

    // A work verdict behind invalid bytes still decides.
    let mut bytes = vec![0x80; 1000];
    bytes.extend_from_slice(b"\ntest result: FAILED. 1 passed; 1 failed\n");
    bytes.extend_from_slice(&[0xff; 1000]);
    let p = file("hostile-invalid-utf8-work.txt", &bytes);
    assert_eq!(json_out(&cli(&["classify", p.to_str().unwrap()], b""))["class"], "work");

    // JSON must be UTF-8: refused, naming it.
    let mut state = br#"{"situation":{"step_failed":{"attempt":1,"evidence":{"text":""#.to_vec();
    state.extend_from_slice(&[0xff, 0xfe]);
    state.extend_from_slice(br#""}}}}"#);
    let p = file("hostile-invalid-utf8-state.json", &state);
    refused(&cli(&["next-action", p.to_str().unwrap()], b""), &["state is not UTF-8"]);

    // In --jsonl, a line with invalid bytes is read lossily like the text.
    let mut lines = br#"{"text":"read ECONNRESET "#.to_vec();
    lines.extend_from_slice(&[0xff]);
    lines.extend_from_slice(b"\"}\n");
    let o = cli(&["classify", "--jsonl"], &lines);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["class"], "transient_transport");
}

#[test]
fn nul_bytes_in_files_and_json_are_handled_by_the_cli() {
    let p = file("hostile-nul.txt", b"\0\0\0API Error: 529 Overloaded\0\0\n\0");
    let v = json_out(&cli(&["classify", p.to_str().unwrap()], b""));
    assert_eq!(v["class"], "transient_transport");
    assert_eq!(v["signal"], "api error: 529");
    // Escaped NULs in JSON strings are text like any other.
    let s = r#"{"situation":{"step_failed":{"attempt":1,"evidence":{"text":"\u0000read ECONNRESET\u0000","steps":[{"id":"\u0000","status":"error"}]}}}}"#;
    let v = json_out(&cli(&["next-action"], s.as_bytes()));
    assert_eq!(v["action"], "retry");
    assert_eq!(v["failed_steps"], json!(["\u{0}"]));
    // A raw NUL inside a JSON string is not JSON.
    let s = b"{\"situation\":{\"step_failed\":{\"attempt\":1,\"evidence\":{\"text\":\"a\0b\"}}}}";
    refused(&cli(&["next-action"], s), &["state", "control character"]);
    // A file of nothing but NULs is an indeterminate failure, not an error.
    let p = file("hostile-only-nul.txt", &[0u8; 4096]);
    assert_eq!(json_out(&cli(&["classify", p.to_str().unwrap()], b""))["class"], "indeterminate");
}

#[test]
fn sixteen_mib_through_the_cli_is_classified_by_its_tail() {
    let text = sixteen_mib_then("\nread tcp 10.0.0.1:443: connection reset by peer\n");
    let p = file("hostile-16mib.txt", text.as_bytes());
    let v = json_out(&cli(&["classify", p.to_str().unwrap()], b""));
    assert_eq!(v["class"], "transient_transport");
    // Under a memory cap too small for it, the CLI says so and exits 3.
    let o = cli(&["--memory-mib", "8", "classify", p.to_str().unwrap()], b"");
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("memory limit"), "{}", stderr(&o));
}

#[test]
fn fifty_thousand_steps_and_headers_are_read_up_to_their_bounds() {
    let steps: Vec<m::StepReport> = (0..50_000)
        .map(|i| m::StepReport {
            id: format!("step-{i}"),
            status: "error".into(),
            stderr: Some("read ECONNRESET".into()),
            ..Default::default()
        })
        .collect();
    let headers = vec![m::Header { name: "retry-after".into(), value: "1".into() }; 50_000];
    let e = m::Evidence { steps, headers, ..Default::default() };
    let s = state(
        m::Config::default(),
        m::Situation::StepFailed(m::StepFailure { evidence: e.clone(), attempt: 1, waited: 0, elapsed: 0 }),
    );
    let d = with_limits(Limits::default(), |b| b.next_action(&s)).expect("no trap").expect("a decision");
    assert_eq!(d.action, m::Action::Retry, "{}", d.reasoning);
    assert_eq!(d.failed_steps.len(), backstop::classify::MAX_STEPS, "only the first steps are read");
    assert_eq!(d.delay, Some(1_000_000_000), "the first retry-after decides");
    assert_eq!(d, backstop::next_action(&s).unwrap());
}
