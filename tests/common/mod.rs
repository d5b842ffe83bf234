//! The vector loader and matcher shared by the native and component runners.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::Value;

/// `tests/vectors` of the workspace, from the root package or from `host-test`.
pub fn vector_dir() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let own = here.join("tests").join("vectors");
    if own.is_dir() {
        own
    } else {
        here.join("..").join("tests").join("vectors")
    }
}

/// Every vector file, sorted by name, with its parsed content.
pub fn vector_files() -> Vec<(String, Value)> {
    let dir = vector_dir();
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.file_name().unwrap().to_string_lossy().into_owned(), v)
        })
        .collect()
}

/// Checks `actual` against the `expected` subset; returns the first mismatch.
pub fn matches(expected: &Value, actual: &Value, path: &str) -> Result<(), String> {
    if let Value::Object(m) = expected {
        if m.len() == 1 {
            if let Some(Value::Array(b)) = m.get("between") {
                let n = as_f64(actual).ok_or_else(|| format!("{path}: expected a number, got {actual}"))?;
                let lo = as_f64(&b[0]).unwrap();
                let hi = as_f64(&b[1]).unwrap();
                return if lo <= n && n <= hi { Ok(()) } else { Err(format!("{path}: {n} not in [{lo}, {hi}]")) };
            }
            if let Some(Value::String(s)) = m.get("contains") {
                return match actual {
                    Value::String(a) if a.contains(s.as_str()) => Ok(()),
                    _ => Err(format!("{path}: {actual} does not contain {s:?}")),
                };
            }
            if m.get("absent") == Some(&Value::Bool(true)) {
                return if actual.is_null() { Ok(()) } else { Err(format!("{path}: expected absent, got {actual}")) };
            }
        }
        let Value::Object(a) = actual else { return Err(format!("{path}: expected an object, got {actual}")) };
        for (k, ev) in m {
            let av = a.get(k).unwrap_or(&Value::Null);
            matches(ev, av, &format!("{path}.{k}"))?;
        }
        return Ok(());
    }
    if let (Value::Array(e), Value::Array(a)) = (expected, actual) {
        if e.len() != a.len() {
            return Err(format!("{path}: expected {} items, got {}: {actual}", e.len(), a.len()));
        }
        for (i, (ev, av)) in e.iter().zip(a).enumerate() {
            matches(ev, av, &format!("{path}[{i}]"))?;
        }
        return Ok(());
    }
    if let (Some(x), Some(y)) = (as_f64(expected), as_f64(actual)) {
        return if x == y { Ok(()) } else { Err(format!("{path}: expected {expected}, got {actual}")) };
    }
    if expected == actual {
        Ok(())
    } else {
        Err(format!("{path}: expected {expected}, got {actual}"))
    }
}

fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse::<u64>().ok().map(|n| n as f64),
        _ => None,
    }
}

/// One call a vector asks for.
pub enum Call {
    Classify(Value),
    NextAction(Value),
    Signature(String, Option<String>),
}

/// What a host answered: the result as JSON, or the error as JSON.
pub type Answer = Result<Value, Value>;

/// Every `step_failed` state of the vectors (next-action cases and story
/// steps), with where it stands.
pub fn step_failed_states() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (file, v) in vector_files() {
        for case in v["cases"].as_array().into_iter().flatten() {
            let id = case["id"].as_str().unwrap_or("?");
            let steps: Vec<&Value> = match case["steps"].as_array() {
                Some(steps) => steps.iter().collect(),
                None => vec![case],
            };
            for (i, step) in steps.into_iter().enumerate() {
                if step["input"]["situation"].get("step_failed").is_some() {
                    out.push((format!("{file}/{id}#{i}"), step["input"].clone()));
                }
            }
        }
    }
    out
}

/// Runs every case of every file through `host`; returns (cases run, failures).
pub fn run_all(host: &mut dyn FnMut(Call) -> Answer) -> (usize, Vec<String>) {
    let mut count = 0;
    let mut failures = Vec::new();
    for (file, v) in vector_files() {
        let function = v["function"].as_str().unwrap_or_else(|| panic!("{file}: no function")).to_string();
        for case in v["cases"].as_array().unwrap_or_else(|| panic!("{file}: no cases")) {
            let id = case["id"].as_str().unwrap_or("?").to_string();
            count += 1;
            let steps: Vec<&Value> = if function == "story" {
                case["steps"].as_array().unwrap_or_else(|| panic!("{file}/{id}: no steps")).iter().collect()
            } else {
                vec![case]
            };
            for (i, step) in steps.iter().enumerate() {
                let call = match function.as_str() {
                    "classify" => Call::Classify(step["input"].clone()),
                    "next_action" | "story" => Call::NextAction(step["input"].clone()),
                    "signature" => Call::Signature(
                        step["input"]["detail"].as_str().unwrap_or_default().to_string(),
                        step["input"]["check"].as_str().map(str::to_string),
                    ),
                    other => panic!("{file}: unknown function {other}"),
                };
                let where_ =
                    if function == "story" { format!("{file}/{id} step {}", i + 1) } else { format!("{file}/{id}") };
                let answer = host(call);
                let outcome = match (answer, step.get("expected"), step.get("expected_error")) {
                    (Ok(actual), Some(exp), None) => matches(exp, &actual, "result"),
                    (Err(err), None, Some(exp)) => matches(exp, &err, "error"),
                    (Ok(actual), None, Some(_)) => Err(format!("expected an error, got {actual}")),
                    (Err(err), Some(_), None) => Err(format!("unexpected error {err}")),
                    _ => Err("a case needs exactly one of expected, expected_error".to_string()),
                };
                if let Err(e) = outcome {
                    failures.push(format!("{where_}: {e}"));
                }
            }
        }
    }
    (count, failures)
}
