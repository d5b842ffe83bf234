//! The decision record is written down in `schema/decision.schema.json`:
//! every next_action vector's answer and the CLI's output are checked against
//! it, and its version moves only with a migration in `docs/schema.md`.

#[path = "../../tests/common/mod.rs"]
mod common;
mod support;

use support::cli as backstop_cli;

use backstop::model as m;
use serde_json::{json, Value};

const SCHEMA: &str = include_str!("../../schema/decision.schema.json");
const SCHEMA_DOC: &str = include_str!("../../docs/schema.md");

fn schema() -> Value {
    serde_json::from_str(SCHEMA).expect("the schema is JSON")
}

fn validator() -> jsonschema::Validator {
    jsonschema::draft202012::new(&schema()).expect("the schema compiles")
}

fn problems(v: &jsonschema::Validator, record: &Value) -> Vec<String> {
    v.iter_errors(record).map(|e| format!("{} at {}", e, e.instance_path)).collect()
}

/// Every `next_action` input of the vectors (story steps included).
fn vector_states() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (file, doc) in common::vector_files() {
        let function = doc["function"].as_str().unwrap_or_default();
        if function != "next_action" && function != "story" {
            continue;
        }
        for case in doc["cases"].as_array().unwrap() {
            let id = case["id"].as_str().unwrap_or("?");
            let steps: Vec<&Value> = match function {
                "story" => case["steps"].as_array().unwrap().iter().collect(),
                _ => vec![case],
            };
            for (i, step) in steps.into_iter().enumerate() {
                out.push((format!("{file}/{id}#{i}"), step["input"].clone()));
            }
        }
    }
    out
}

/// The top-level keys of a compact JSON object in the order written.
fn key_order(record_json: &str, keys: &[String]) -> Result<(), String> {
    let mut from = 0;
    for k in keys {
        let needle = format!("\"{k}\":");
        match record_json[from..].find(&needle) {
            Some(i) => from += i + needle.len(),
            None => return Err(format!("key {k:?} missing or out of order in {record_json}")),
        }
    }
    Ok(())
}

fn required(schema: &Value) -> Vec<String> {
    schema["required"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().to_string()).collect()
}

#[test]
fn every_vector_decision_matches_the_schema_in_key_order() {
    let v = validator();
    let keys = required(&schema());
    let mut decisions = 0;
    let mut failures = Vec::new();
    let mut actions = std::collections::BTreeSet::new();
    for (at, input) in vector_states() {
        let state: m::State = serde_json::from_value(input).unwrap_or_else(|e| panic!("{at}: {e}"));
        let Ok(d) = backstop::next_action(&state) else { continue };
        decisions += 1;
        let record: Value = serde_json::from_str(&d.record_json).unwrap();
        actions.insert(record["action"].as_str().unwrap().to_string());
        for p in problems(&v, &record) {
            failures.push(format!("{at}: {p}"));
        }
        if let Err(e) = key_order(&d.record_json, &keys) {
            failures.push(format!("{at}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(decisions >= 100, "only {decisions} decisions checked");
    // The vectors reach every action, so each enum value was checked once.
    assert_eq!(actions.len(), 7, "{actions:?}");
}

#[test]
fn the_schema_lists_exactly_the_record_fields() {
    let s = schema();
    let props: Vec<String> = s["properties"].as_object().unwrap().keys().cloned().collect();
    let mut req = required(&s);
    let d = backstop::next_action(&m::State {
        now: 0,
        entropy: 0,
        config: m::Config::default(),
        situation: m::Situation::CycleEntered(m::CycleEntry { name: "c".into(), count: 1 }),
    })
    .unwrap();
    let record: Value = serde_json::from_str(&d.record_json).unwrap();
    let mut fields: Vec<String> = record.as_object().unwrap().keys().cloned().collect();
    fields.sort();
    req.sort();
    let mut props = props;
    props.sort();
    assert_eq!(fields, req, "the schema's required keys are the record's keys");
    assert_eq!(fields, props, "the schema describes each key");
    assert_eq!(s["additionalProperties"], json!(false));
    assert_eq!(s["$defs"]["circuit_breaker"]["additionalProperties"], json!(false));
    assert_eq!(s["$defs"]["run_auto_resumed"]["additionalProperties"], json!(false));
}

#[test]
fn the_schema_rejects_what_it_should() {
    let v = validator();
    let d = backstop::next_action(&m::State {
        now: 1_790_000_000_000,
        entropy: 3,
        config: m::Config::default(),
        situation: m::Situation::StepFailed(m::StepFailure {
            evidence: m::Evidence::from_text("API Error: 529"),
            attempt: 1,
            waited: 0,
            elapsed: 0,
        }),
    })
    .unwrap();
    let good: Value = serde_json::from_str(&d.record_json).unwrap();
    assert!(problems(&v, &good).is_empty(), "{:?}", problems(&v, &good));
    type Breakage = (&'static str, fn(&mut Value));
    let broken: [Breakage; 8] = [
        ("an unknown key", |r| r["extra"] = json!(1)),
        ("a missing key", |r| {
            r.as_object_mut().unwrap().remove("waited");
        }),
        ("an unknown action", |r| r["action"] = json!("retry_forever")),
        ("an unknown class", |r| r["class"] = json!("flaky")),
        ("a negative delay", |r| r["delay"] = json!(-1)),
        ("a string duration", |r| r["waited"] = json!("10")),
        ("another schema version", |r| r["schema_version"] = json!(2)),
        (
            "a breaker record with an unknown key",
            |r| r["circuit_breaker"] = json!({"breaker": "build", "signature": "", "count": 1, "threshold": 3, "manual": null, "look_at": "x", "unblock_commands": ["u"], "extra": true}),
        ),
    ];
    for (what, breakit) in broken {
        let mut r = good.clone();
        breakit(&mut r);
        assert!(!problems(&v, &r).is_empty(), "the schema accepts {what}");
    }
}

#[test]
fn schema_version_moves_only_with_a_documented_migration() {
    let s = schema();
    assert_eq!(
        s["properties"]["schema_version"]["const"],
        json!(backstop::SCHEMA_VERSION),
        "the schema file is for the current version"
    );
    assert_eq!(backstop::info().schema_version, backstop::SCHEMA_VERSION);
    // docs/schema.md has a section for every version, the first with what it
    // is and each later one with its migration from the one before.
    for n in 1..=backstop::SCHEMA_VERSION {
        let heading = format!("## schema_version {n}");
        let at = SCHEMA_DOC.find(&heading).unwrap_or_else(|| panic!("docs/schema.md lacks `{heading}`"));
        if n > 1 {
            let section = &SCHEMA_DOC[at..];
            let end = section[heading.len()..].find("\n## ").map(|i| i + heading.len()).unwrap_or(section.len());
            assert!(section[..end].contains("Migration from"), "version {n} has no migration section");
        }
    }
    let next = format!("## schema_version {}", backstop::SCHEMA_VERSION + 1);
    assert!(!SCHEMA_DOC.contains(&next), "docs/schema.md describes a version the code does not write");
}

// ---------------------------------------------------------------- the CLI

#[test]
fn cli_next_action_output_and_marker_lines_match_the_schema() {
    let v = validator();
    let keys = required(&schema());
    // One state of each next_action and story file, and a state per action.
    let mut picked: Vec<(String, Value)> = Vec::new();
    let mut seen_files = std::collections::BTreeSet::new();
    let mut seen_actions = std::collections::BTreeSet::new();
    for (at, input) in vector_states() {
        let file = at.split('/').next().unwrap().to_string();
        let state: m::State = serde_json::from_value(input.clone()).unwrap();
        let Ok(d) = backstop::next_action(&state) else { continue };
        if seen_files.insert(file) | seen_actions.insert(d.action.as_str()) {
            picked.push((at, input));
        }
    }
    assert!(picked.len() >= 7, "{}", picked.len());
    for (at, input) in &picked {
        let bytes = serde_json::to_vec(input).unwrap();
        let out = backstop_cli(&["next-action"], &bytes);
        assert!(out.status.success(), "{at}: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let record: Value = serde_json::from_str(text.trim_end()).unwrap();
        assert!(problems(&v, &record).is_empty(), "{at}: {:?}", problems(&v, &record));
        key_order(text.trim_end(), &keys).unwrap_or_else(|e| panic!("{at}: {e}"));

        let out = backstop_cli(&["next-action", "--marker"], &bytes);
        assert!(out.status.success(), "{at}: {}", String::from_utf8_lossy(&out.stderr));
        let line = String::from_utf8(out.stdout).unwrap();
        let json = line.trim_end().strip_prefix(backstop::MARKER_PREFIX).unwrap_or_else(|| panic!("{at}: {line}"));
        let record: Value = serde_json::from_str(json).unwrap();
        assert!(problems(&v, &record).is_empty(), "{at} --marker: {:?}", problems(&v, &record));
    }
}

#[test]
fn cli_demo_marker_lines_match_the_schema() {
    let v = validator();
    let out = backstop_cli(&["demo"], b"");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut n = 0;
    for line in text.lines() {
        if let Some(json) = line.strip_prefix(backstop::MARKER_PREFIX) {
            let record: Value = serde_json::from_str(json).unwrap();
            assert!(problems(&v, &record).is_empty(), "{line}: {:?}", problems(&v, &record));
            n += 1;
        }
    }
    assert!(n >= 4, "{n} marker lines in the demo");
}
