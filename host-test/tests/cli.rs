//! The `backstop` command line, run as a user would.

mod support;

use std::process::Output;

use serde_json::Value;
use support::{cli as backstop, file as tmp};

fn json_out(o: &Output) -> Value {
    assert!(o.status.success(), "exit {:?}: {}", o.status, String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

const SEED_STEP: &str = "agent step failed: amplihack claude failed (exit 1)\nAPI Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment.\nIf it persists, check https://status.claude.com.\n";

#[test]
fn classify_seed_incident_text_from_stdin_and_file() {
    let v = json_out(&backstop(&["classify"], SEED_STEP.as_bytes()));
    assert_eq!(v["class"], "transient_transport");
    assert_eq!(v["signal"], "api error: 529");
    let with_tests = format!("{SEED_STEP}test result: FAILED. 1 failed\n");
    let f = tmp("seed-plus-tests.txt", with_tests.as_bytes());
    let v = json_out(&backstop(&["classify", f.to_str().unwrap()], b""));
    assert_eq!(v["class"], "work");
    assert_eq!(v["signal"], "test result: failed");
}

#[test]
fn classify_jsonl_handles_200_lines_in_order_in_one_process() {
    let texts = ["API Error: 529 Overloaded", "test result: FAILED. 1 failed", "invalid x-api-key", "nothing to see"];
    let classes = ["transient_transport", "work", "environmental", "indeterminate"];
    let mut input = String::new();
    for i in 0..200 {
        let line = serde_json::json!({"text": texts[i % 4], "exit_code": 1, "id": i});
        input.push_str(&line.to_string());
        input.push('\n');
    }
    let f = tmp("two-hundred.jsonl", input.as_bytes());
    let o = backstop(&["classify", "--jsonl", f.to_str().unwrap()], b"");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lines: Vec<Value> =
        String::from_utf8(o.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 200);
    for (i, v) in lines.iter().enumerate() {
        assert_eq!(v["class"], classes[i % 4], "line {}", i + 1);
    }
}

#[test]
fn classify_jsonl_reports_a_bad_line_and_keeps_alignment() {
    let o = backstop(
        &["classify", "--jsonl"],
        b"{\"text\":\"socket hang up\"}\nnot json\n{\"evidence\":\"invalid x-api-key\"}\n",
    );
    assert_eq!(o.status.code(), Some(2));
    let out = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3);
    assert!(lines[1].contains("\"error\"") && lines[1].contains("line 2"), "{}", lines[1]);
    assert!(lines[2].contains("environmental"));
    assert!(String::from_utf8_lossy(&o.stderr).contains("line 2"));
}

#[test]
fn next_action_prints_decision_and_marker_line() {
    let state = serde_json::json!({
        "now": 1790000000000u64, "entropy": 1,
        "situation": {"step_failed": {"attempt": 1, "waited": 0, "evidence": {"text": SEED_STEP}}}
    });
    let f = tmp("state.json", state.to_string().as_bytes());
    let v = json_out(&backstop(&["next-action", f.to_str().unwrap()], b""));
    assert_eq!(v["action"], "retry");
    assert_eq!(v["schema_version"], 1);
    let o = backstop(&["next-action", "--marker", f.to_str().unwrap()], b"");
    assert!(o.status.success());
    let line = String::from_utf8(o.stdout).unwrap();
    let json = line.trim_end().strip_prefix("backstop.failure_class ").expect("marker prefix");
    let record: Value = serde_json::from_str(json).unwrap();
    assert_eq!(record, v, "the marker line carries the same object as the data");
    assert_eq!(line.trim_end().lines().count(), 1);
}

#[test]
fn bad_input_exits_2_naming_the_problem() {
    let o = backstop(&["next-action", "/nonexistent/state.json"], b"");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/state.json"));

    let o = backstop(&["next-action"], b"{\"situation\": ");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("state"), "{}", String::from_utf8_lossy(&o.stderr));

    let o = backstop(&["next-action"], br#"{"situation":{"step_failed":{"attempt":"three"}}}"#);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("invalid type") && err.contains("three"), "{err}");

    let o = backstop(
        &["next-action"],
        br#"{"situation":{"step_failed":{"attempt":1}},"config":{"transport":{"max_attempts":11}}}"#,
    );
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("config.transport.max_attempts") && err.contains("at most 10"), "{err}");

    // Deep nesting is refused, never a crash: the state's first field (`now`,
    // a u64) meets a sequence and is refused before any recursion.
    let deep = "[".repeat(100_000);
    let o = backstop(&["next-action"], deep.as_bytes());
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("state: invalid type: sequence"), "{err}");
}

#[test]
fn classify_reads_invalid_utf8_and_nul_bytes() {
    let mut bytes = b"\xff\xfe garbage \x00\x00 ".to_vec();
    bytes.extend_from_slice(b"read ECONNRESET\n\xc3");
    let f = tmp("binary.txt", &bytes);
    let v = json_out(&backstop(&["classify", f.to_str().unwrap()], b""));
    assert_eq!(v["class"], "transient_transport");
}

#[test]
fn signature_ignores_line_numbers_and_addresses() {
    let a = json_sig("error[E0425]: cannot find value `x` in this scope\n --> src/main.rs:10:5\n");
    let b = json_sig("error[E0425]: cannot find value `x` in this scope\n --> src/main.rs:42:9\n");
    let c = json_sig("error[E0308]: mismatched types\n --> src/main.rs:10:5\n");
    assert_eq!(a, b);
    assert_ne!(a, c);
}

fn json_sig(text: &str) -> String {
    let o = backstop(&["signature"], text.as_bytes());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap().trim_end().to_string()
}

#[test]
fn demo_replays_the_seed_incidents() {
    let o = backstop(&["demo"], b"");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    let records: Vec<Value> = out
        .lines()
        .filter_map(|l| l.strip_prefix("backstop.failure_class "))
        .map(|j| serde_json::from_str(j).unwrap())
        .collect();
    let actions: Vec<&str> = records.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["retry", "retry", "retry", "terminal", "proceed", "proceed", "block", "resume"], "{out}");
    assert_eq!(records[0]["signal"], "api error: 529");
    assert_eq!(records[0]["completed_steps"].as_array().unwrap().len(), 5);
    assert_eq!(records[3]["class"], "work");
    assert!(out.contains("succeeded"));
    // The task loop: re-enqueued after 2 and 4 minutes, then blocked at 3.
    assert_eq!(records[4]["delay"], 120_000_000_000u64);
    assert_eq!(records[5]["delay"], 240_000_000_000u64);
    assert_eq!(records[6]["circuit_breaker"]["count"], 3);
    // The usage limit resumes at its stated reset, recorded as automatic.
    assert_eq!(records[7]["run_auto_resumed"]["reason"], "usage-limit-reset");
}

#[test]
fn info_matches_the_native_tables() {
    let o = backstop(&["info"], b"");
    let v = json_out(&o);
    assert_eq!(v["markers_digest"], backstop::info().markers_digest);
    assert_eq!(v["schema_version"], 1);
    assert_eq!(o.stdout.last(), Some(&b'\n'), "a JSON line ends with a newline");
}

/// `backstop classify --jsonl big | head -1`: a reader that goes away early
/// ends the CLI with a message, never a panic. The output (about 1.5 MB) is
/// far more than a pipe holds, so the CLI is still writing when it goes.
#[test]
fn a_closed_stdout_ends_the_cli_without_a_panic() {
    use std::io::{BufRead, BufReader, Read};
    use std::process::{Command, Stdio};
    let lines = "{\"evidence\": \"API Error: 529 Overloaded\"}\n".repeat(3000);
    let input = tmp("closed-stdout.jsonl", lines.as_bytes());
    let mut child = Command::new(env!("CARGO_BIN_EXE_backstop"))
        .args(["classify", "--jsonl", input.to_str().unwrap()])
        .env("BACKSTOP_CACHE_DIR", std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-cache"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.contains("transient_transport"), "{first}");
    // The reader is dropped here: the CLI's next write meets a closed pipe.
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let status = child.wait().unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("writing stdout"), "{stderr}");
}
