//! `backstop serve`: JSON requests on one stream, JSON responses on another,
//! one per line, every call through the component. For hosts in languages
//! with no WebAssembly component runtime (Go, .NET, Java, Ruby, ...): start
//! the process once and talk to it over pipes.
//!
//! A request is `{"id": any, "function": F, "input": ...}` with F one of
//! `classify` (input: an evidence object, or a text string as the CLI's
//! `classify` reads), `next-action` (a state object), `signature`
//! (`{"detail": "...", "check": "..."}` or a string), `default-config` and
//! `info` (no input). `_` may stand for `-` in F. The shapes are the vectors'
//! and the CLI's (snake_case JSON of the WIT types).
//!
//! The answer echoes `id`: `{"id": ..., "ok": result}` or
//! `{"id": ..., "error": {"kind": K, "message": "..."}}` where K is
//! `bad_request` (the line is not JSON, not an object, names no known
//! function, or its input does not fit the shape: the CLI's exit 2),
//! `invalid_config` / `invalid_input` (the policy refuses; `field` and `rule`
//! say why, as the CLI's exit 2), `limit` (a memory, fuel or deadline limit was hit: the
//! CLI's exit 3) or `host` (the component failed otherwise: exit 1). After an
//! error the server goes on with the next line; blank lines are skipped; it
//! exits at the end of its input.

use std::io::{BufRead, Read, Write};

use backstop::model as m;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::{Backstop, HostError};

/// A request line longer than this is refused (and skipped).
pub const MAX_LINE: u64 = 64 << 20;

/// The `error` of a response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServeError {
    pub kind: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

impl ServeError {
    fn bad(message: impl Into<String>) -> ServeError {
        ServeError { kind: "bad_request", message: message.into(), field: None, rule: None }
    }
}

impl From<HostError> for ServeError {
    fn from(e: HostError) -> ServeError {
        let kind = match e {
            HostError::MemoryLimit { .. } | HostError::FuelLimit { .. } | HostError::Deadline { .. } => "limit",
            _ => "host",
        };
        ServeError { kind, message: e.to_string(), field: None, rule: None }
    }
}

impl From<m::PolicyError> for ServeError {
    fn from(e: m::PolicyError) -> ServeError {
        let (kind, f) = match &e {
            m::PolicyError::InvalidConfig(f) => ("invalid_config", f),
            m::PolicyError::InvalidInput(f) => ("invalid_input", f),
        };
        ServeError { kind, message: e.to_string(), field: Some(f.field.clone()), rule: Some(f.rule.clone()) }
    }
}

/// Answers every request line of `input` on `output`, flushing after each
/// answer; returns how many requests it answered.
pub fn serve(b: &mut Backstop, mut input: impl BufRead, mut output: impl Write) -> std::io::Result<usize> {
    let mut buf = Vec::new();
    let mut answered = 0;
    let mut line_no = 0usize;
    while let Some(too_long) = read_line(&mut input, &mut buf)? {
        line_no += 1;
        let response = if too_long {
            error_response(
                Value::Null,
                ServeError::bad(format!("line {line_no} is larger than {} MiB", MAX_LINE >> 20)),
            )
        } else {
            match std::str::from_utf8(&buf) {
                Err(e) => error_response(Value::Null, ServeError::bad(format!("line {line_no} is not UTF-8: {e}"))),
                Ok(text) if text.trim().is_empty() => continue,
                Ok(text) => answer(b, text, line_no),
            }
        };
        serde_json::to_writer(&mut output, &response)?;
        output.write_all(b"\n")?;
        output.flush()?;
        answered += 1;
    }
    Ok(answered)
}

/// Reads one line into `buf` (newline included); `None` at the end of input,
/// `Some(true)` when the line was longer than `MAX_LINE` (its rest is skipped).
fn read_line(input: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<Option<bool>> {
    buf.clear();
    if input.by_ref().take(MAX_LINE + 1).read_until(b'\n', buf)? == 0 {
        return Ok(None);
    }
    if buf.len() as u64 <= MAX_LINE || buf.last() == Some(&b'\n') {
        return Ok(Some(false));
    }
    loop {
        let mut rest = Vec::new();
        let n = input.by_ref().take(1 << 20).read_until(b'\n', &mut rest)?;
        if n == 0 || rest.last() == Some(&b'\n') {
            return Ok(Some(true));
        }
    }
}

fn error_response(id: Value, e: ServeError) -> Value {
    json!({ "id": id, "error": e })
}

/// The response to one request line.
pub fn answer(b: &mut Backstop, line: &str, line_no: usize) -> Value {
    let request: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return error_response(Value::Null, ServeError::bad(format!("line {line_no}: not JSON: {e}"))),
    };
    let Value::Object(mut request) = request else {
        return error_response(Value::Null, ServeError::bad(format!("line {line_no}: a request is a JSON object")));
    };
    let id = request.remove("id").unwrap_or(Value::Null);
    let function = match request.get("function") {
        Some(Value::String(f)) => f.replace('_', "-"),
        Some(other) => return error_response(id, ServeError::bad(format!("function: expected a string, got {other}"))),
        None => return error_response(id, ServeError::bad("function: missing")),
    };
    let input = request.remove("input").unwrap_or(Value::Null);
    match call(b, &function, input) {
        Ok(v) => json!({ "id": id, "ok": v }),
        Err(e) => error_response(id, e),
    }
}

fn call(b: &mut Backstop, function: &str, input: Value) -> Result<Value, ServeError> {
    match function {
        "classify" => {
            let evidence = match input {
                Value::String(text) => m::Evidence::from_text(text),
                v @ Value::Object(_) => from_input(v, "evidence")?,
                other => return Err(ServeError::bad(format!("evidence: expected an object or a string, got {other}"))),
            };
            to_value(b.classify(&evidence)?)
        }
        "classify-with" => {
            #[derive(Deserialize)]
            #[serde(deny_unknown_fields)]
            struct WithConfig {
                evidence: m::Evidence,
                #[serde(default)]
                config: m::Config,
            }
            let w: WithConfig = from_input(input, "classify-with input")?;
            to_value(b.classify_with(&w.evidence, &w.config)??)
        }
        "next-action" => {
            let state: m::State = from_input(input, "state")?;
            to_value(b.next_action(&state)??)
        }
        "signature" => {
            #[derive(Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Detail {
                detail: String,
                #[serde(default)]
                check: Option<String>,
            }
            let d = match input {
                Value::String(detail) => Detail { detail, check: None },
                v => from_input(v, "signature input")?,
            };
            Ok(Value::String(b.signature(&d.detail, d.check.as_deref())?))
        }
        "default-config" => to_value(b.default_config()?),
        "info" => to_value(b.info()?),
        other => Err(ServeError::bad(format!(
            "function: unknown {other:?}; expected classify, classify-with, next-action, signature, default-config or info"
        ))),
    }
}

fn from_input<T: serde::de::DeserializeOwned>(v: Value, what: &str) -> Result<T, ServeError> {
    serde_json::from_value(v).map_err(|e| ServeError::bad(format!("{what}: {e}")))
}

fn to_value<T: Serialize>(v: T) -> Result<Value, ServeError> {
    serde_json::to_value(v).map_err(|e| ServeError { kind: "host", message: e.to_string(), field: None, rule: None })
}
