//! Invariants of the vector files themselves: known functions and fields,
//! unique ids, descriptions, and integers JavaScript can hold.

mod common;

use std::collections::HashSet;

use serde_json::Value;

const MAX_SAFE: u64 = (1 << 53) - 1;

fn check_numbers(v: &Value, at: &str, problems: &mut Vec<String>) {
    match v {
        Value::Number(n)
            if n.as_u64().is_some_and(|u| u > MAX_SAFE) || n.as_i64().is_some_and(|i| i < -(MAX_SAFE as i64)) =>
        {
            problems.push(format!("{at}: {n} is beyond 2^53; write it as a string"));
        }
        Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| check_numbers(x, &format!("{at}[{i}]"), problems)),
        Value::Object(m) => m.iter().for_each(|(k, x)| check_numbers(x, &format!("{at}.{k}"), problems)),
        _ => {}
    }
}

#[test]
fn vector_files_are_well_formed() {
    let mut ids = HashSet::new();
    let mut problems = Vec::new();
    let files = common::vector_files();
    assert!(!files.is_empty());
    for (file, v) in &files {
        let Some(obj) = v.as_object() else { panic!("{file}: not an object") };
        for k in obj.keys() {
            if !["function", "description", "cases", "notes"].contains(&k.as_str()) {
                problems.push(format!("{file}: unknown top-level field {k}"));
            }
        }
        let function = v["function"].as_str().unwrap_or("");
        if !["classify", "next_action", "signature", "story"].contains(&function) {
            problems.push(format!("{file}: unknown function {function:?}"));
        }
        if v["description"].as_str().is_none_or(|d| d.trim().is_empty()) {
            problems.push(format!("{file}: no description"));
        }
        let cases = v["cases"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        if cases.is_empty() {
            problems.push(format!("{file}: no cases"));
        }
        for case in cases {
            let id = case["id"].as_str().unwrap_or("");
            if id.is_empty() {
                problems.push(format!("{file}: a case without an id"));
            }
            if !ids.insert(id.to_string()) {
                problems.push(format!("{file}: duplicate id {id}"));
            }
            let desc = case["description"].as_str().unwrap_or("");
            if desc.trim().is_empty() || desc.to_lowercase().contains("should") {
                problems.push(format!("{file}/{id}: description missing or says 'should'"));
            }
            let allowed: &[&str] = if function == "story" {
                &["id", "description", "steps", "flags", "source"]
            } else {
                &["id", "description", "input", "expected", "expected_error", "flags", "source"]
            };
            for k in case.as_object().map(|m| m.keys().collect::<Vec<_>>()).unwrap_or_default() {
                if !allowed.contains(&k.as_str()) {
                    problems.push(format!("{file}/{id}: unknown field {k}"));
                }
            }
            check_numbers(case, &format!("{file}/{id}"), &mut problems);
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn matcher_rejects_what_it_should_reject() {
    use serde_json::json;
    assert!(common::matches(&json!({"between": [1, 2]}), &json!(3), "x").is_err());
    assert!(common::matches(&json!({"contains": "ab"}), &json!("xaby"), "x").is_ok());
    assert!(common::matches(&json!({"a": 1}), &json!({"a": 2, "b": 3}), "x").is_err());
    assert!(common::matches(&json!([1]), &json!([1, 2]), "x").is_err());
    assert!(common::matches(&json!({"absent": true}), &json!(0), "x").is_err());
}
