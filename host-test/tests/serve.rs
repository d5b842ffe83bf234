//! `backstop serve` as a subprocess: every shared vector as a request line,
//! every answer checked, and bad lines answered with errors while the server
//! goes on.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use common::{run_all, Answer, Call};
use serde_json::{json, Value};

/// A running `backstop serve`, asked one line at a time.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Server {
    fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_backstop"))
            .args(args)
            .arg("serve")
            .env("BACKSTOP_CACHE_DIR", Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-cache"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("backstop serve runs");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Server { child, stdin, stdout }
    }

    /// Sends one raw line and reads the one response line.
    fn line(&mut self, line: &str) -> Value {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        let mut out = String::new();
        assert!(self.stdout.read_line(&mut out).unwrap() > 0, "serve closed its output after {line:.200}");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
    }

    fn ask(&mut self, request: &Value) -> Value {
        let response = self.line(&request.to_string());
        assert_eq!(response["id"], request["id"], "the response echoes the id");
        response
    }

    /// Closes stdin and expects a clean exit.
    fn finish(mut self) {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "serve exited with {status}");
    }
}

/// The answer as the vector runner compares it: the result, or a policy
/// error as `{kind: {field, rule}}`; any other error fails the vector.
fn as_answer(response: Value) -> Answer {
    if let Some(ok) = response.get("ok") {
        return Ok(ok.clone());
    }
    let e = &response["error"];
    match e["kind"].as_str() {
        Some(kind @ ("invalid_config" | "invalid_input")) => {
            assert!(e["message"].as_str().unwrap().contains(e["field"].as_str().unwrap()), "{e}");
            Err(json!({ kind: { "field": e["field"], "rule": e["rule"] } }))
        }
        _ => Err(json!({ "unexpected": e })),
    }
}

#[test]
fn serve_answers_every_vector_as_the_component_does() {
    let mut server = Server::start(&[]);
    let mut n = 0u64;
    let (count, failures) = run_all(&mut |call: Call| {
        n += 1;
        // Ids of every JSON type come back as they were sent.
        let id = match n % 3 {
            0 => json!(n),
            1 => json!(format!("req-{n}")),
            _ => json!({ "n": n }),
        };
        let request = match call {
            Call::Classify(input) => json!({"id": id, "function": "classify", "input": input}),
            Call::NextAction(input) => json!({"id": id, "function": "next-action", "input": input}),
            Call::Signature(detail, check) => {
                json!({"id": id, "function": "signature", "input": {"detail": detail, "check": check}})
            }
        };
        as_answer(server.ask(&request))
    });
    println!("backstop serve: {count} vectors");
    assert!(count > 0);
    assert!(failures.is_empty(), "{} of {count} vectors failed:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(
        server.ask(&json!({"id": 1, "function": "info"}))["ok"],
        serde_json::to_value(backstop::info()).unwrap()
    );
    let config = server.ask(&json!({"id": 2, "function": "default-config"}));
    assert_eq!(config["ok"], serde_json::to_value(backstop::default_config()).unwrap());
    server.finish();
}

#[test]
fn bad_lines_get_error_responses_and_the_server_goes_on() {
    let mut server = Server::start(&[]);
    let e = server.line("{not json");
    assert_eq!(e["id"], Value::Null);
    assert_eq!(e["error"]["kind"], "bad_request");
    assert!(e["error"]["message"].as_str().unwrap().contains("line 1: not JSON"), "{e}");

    let cases = [
        (json!({"id": "a", "input": "x"}), "function: missing"),
        (json!({"id": "b", "function": "explain"}), "unknown \"explain\""),
        (json!({"id": "c", "function": "classify"}), "evidence: expected an object or a string"),
        (json!({"id": "d", "function": "next-action", "input": {"entropy": 1}}), "state: missing field `situation`"),
        (json!({"id": "e", "function": "signature", "input": {"check": "x"}}), "missing field `detail`"),
        (json!({"id": "f", "function": 7}), "function: expected a string"),
    ];
    for (request, text) in cases {
        let r = server.ask(&request);
        assert_eq!(r["error"]["kind"], "bad_request", "{r}");
        assert!(r["error"]["message"].as_str().unwrap().contains(text), "{r}");
    }
    assert_eq!(server.line("[1, 2]")["error"]["message"], "line 8: a request is a JSON object");

    // The policy's own refusal carries the field and the rule, as the CLI's message does.
    let state = json!({"now": 1, "config": {"transport": {"max_attempts": 11}},
        "situation": {"step_failed": {"attempt": 1, "waited": 0, "evidence": {"text": "x"}}}});
    let r = server.ask(&json!({"id": "g", "function": "next_action", "input": state}));
    assert_eq!(r["error"]["kind"], "invalid_config", "{r}");
    assert_eq!(r["error"]["field"], "config.transport.max_attempts");
    assert!(r["error"]["message"].as_str().unwrap().contains("config.transport.max_attempts"), "{r}");

    // Blank lines get no answer: the next answer is the next request's. A text
    // string classifies as the CLI's `classify` reads text.
    server.stdin.as_mut().unwrap().write_all(b"\n  \n").unwrap();
    let r = server.ask(&json!({"id": "h", "function": "classify", "input": "API Error: 529 Overloaded"}));
    assert_eq!(r["ok"]["class"], "transient_transport", "{r}");
    server.finish();
}

#[test]
fn a_limit_hit_is_an_error_response_and_the_next_request_is_answered() {
    // Enough fuel for a short call, far too little for the last 64 KiB of a
    // megabyte in which every word starts like a marker.
    let mut server = Server::start(&["--fuel", "2000000"]);
    let big = "connection ".repeat(1 << 17) + " API Error: 529";
    let r = server.ask(&json!({"id": 1, "function": "classify", "input": big}));
    assert_eq!(r["error"]["kind"], "limit", "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("fuel limit hit"), "{r}");
    let r = server.ask(&json!({"id": 2, "function": "classify", "input": "API Error: 529 Overloaded"}));
    assert_eq!(r["ok"]["class"], "transient_transport", "{r}");
    server.finish();
}

#[test]
fn a_deadline_hit_is_an_error_response_and_the_next_request_is_answered() {
    let mut server = Server::start(&["--deadline-ms", "1"]);
    // 16 MiB read whole: far more than a millisecond of scanning.
    let config = json!({"evidence": {"scan_bytes": 16 << 20}});
    let huge = "z".repeat(16 << 20) + " API Error: 529";
    let r = server
        .ask(&json!({"id": 1, "function": "classify-with", "input": {"evidence": {"text": huge}, "config": config}}));
    assert_eq!(r["error"]["kind"], "limit", "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("deadline hit"), "{r}");
    let r = server.ask(&json!({"id": 2, "function": "classify", "input": "API Error: 529 Overloaded"}));
    assert_eq!(r["ok"]["class"], "transient_transport", "{r}");
    server.finish();
}

#[test]
fn the_readme_client_example_runs_and_the_readme_holds_it_verbatim() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = here.join("tests").join("serve_client.py");
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_backstop")).parent().unwrap();
    let path = std::env::join_paths(
        std::iter::once(bin_dir.to_path_buf())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .unwrap();
    let o = Command::new("python3")
        .arg(&script)
        .env("PATH", path)
        .env("BACKSTOP_CACHE_DIR", Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-cache"))
        .output()
        .expect("python3 runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8(o.stdout).unwrap(), "transient_transport api error: 529\nretry\n");

    let text = std::fs::read_to_string(&script).unwrap();
    let example =
        text.split("# README example begins\n").nth(1).unwrap().split("# README example ends").next().unwrap();
    let readme = std::fs::read_to_string(here.join("..").join("README.md")).unwrap();
    assert!(readme.contains(example), "README.md does not hold host-test/tests/serve_client.py's example verbatim");
}

#[test]
fn classify_with_applies_the_operator_markers() {
    let mut server = Server::start(&[]);
    let marker = json!({"class": "work", "marker": "bundle_rejected", "match": "word", "source": "our deploy tool"});
    let evidence = json!({"text": "deployctl: BUNDLE_REJECTED after API Error: 529 Overloaded"});
    let input = json!({"evidence": evidence, "config": {"classify": {"markers": [marker]}}});
    let r = server.ask(&json!({"id": 1, "function": "classify-with", "input": input}));
    assert_eq!((r["ok"]["class"].as_str(), r["ok"]["source"].as_str()), (Some("work"), Some("operator_marker")), "{r}");
    let plain = server.ask(&json!({"id": 2, "function": "classify-with", "input": {"evidence": evidence}}));
    assert_eq!(plain["ok"]["class"], "transient_transport", "{plain}");
    let bad = json!({"evidence": evidence, "config": {"classify": {"markers": [{"class": "work", "marker": "X", "match": "word", "source": "s"}]}}});
    let r = server.ask(&json!({"id": 3, "function": "classify_with", "input": bad}));
    assert_eq!(r["error"]["field"], "config.classify.markers[0].marker", "{r}");
    server.finish();
}
