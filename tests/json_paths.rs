//! The JSON functions name a refused value by its path (`src/jsonpath.rs`,
//! found after the refusal where serde_json stopped). Here every vector's
//! input is broken in many ways (cut short, a value of the wrong type, an
//! unknown key, a key removed, a separator dropped), and the path each
//! refusal names is checked against `serde_path_to_error`'s, which tracks
//! the path while it deserializes.

mod common;

use backstop::json::{classify_json, next_action_json};
use backstop::{Evidence, PolicyError, State};
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_path_to_error::Segment;

/// The field `serde_path_to_error` names, in the JSON functions' notation.
fn tracked<T: DeserializeOwned>(text: &str, arg: &str) -> Option<String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let e = match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Ok(_) => return de.end().err().map(|_| arg.to_string()),
        Err(e) => e,
    };
    let rule = e.inner().to_string();
    let mut out = if arg == "state" { String::new() } else { arg.to_string() };
    let push = |out: &mut String, key: &str| {
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(key);
    };
    for segment in e.path().iter() {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } => push(&mut out, key),
            Segment::Enum { variant } => push(&mut out, variant),
            Segment::Unknown => {}
        }
    }
    if let Some(field) = rule.strip_prefix("missing field `").and_then(|r| r.split('`').next()) {
        push(&mut out, field);
    }
    if out.is_empty() {
        out.push_str(arg);
    }
    Some(out)
}

/// A refusal's field and rule, if the JSON function refused.
type Refused = Option<(String, String)>;

fn refusal(r: Result<String, PolicyError>) -> Refused {
    match r {
        Err(PolicyError::InvalidConfig(f)) | Err(PolicyError::InvalidInput(f)) => Some((f.field, f.rule)),
        Ok(_) => None,
    }
}

/// Broken forms of `text`: cut at many places, each scalar replaced by
/// values of other types, an unknown key in each object, each key removed,
/// and each comma dropped.
fn broken(v: &Value) -> Vec<String> {
    let text = v.to_string();
    let step = (text.len() / 80).max(1);
    let mut out: Vec<String> =
        (0..text.len()).step_by(step).filter(|&i| text.is_char_boundary(i)).map(|i| text[..i].to_string()).collect();
    let commas: Vec<usize> = text.match_indices(',').map(|(i, _)| i).collect();
    out.extend(commas.iter().map(|&i| format!("{}{}", &text[..i], &text[i + 1..])));
    let mut paths = Vec::new();
    walk(v, &mut Vec::new(), &mut paths);
    for path in paths {
        for replacement in [r#""x""#, "-1", "1.5", "[]", "{}", "null", "true", "18446744073709551616", r#"{"zz": 1}"#] {
            let mut w = v.clone();
            *at(&mut w, &path) = serde_json::from_str(replacement).unwrap();
            out.push(w.to_string());
        }
        let mut w = v.clone();
        if let (Some((last, parent)), true) = (path.split_last(), !path.is_empty()) {
            if let (Value::Object(m), Key::Name(k)) = (at(&mut w, parent), last) {
                m.remove(k);
                out.push(w.to_string());
            }
        }
    }
    out
}

#[derive(Clone)]
enum Key {
    Name(String),
    Index(usize),
}

fn walk(v: &Value, path: &mut Vec<Key>, out: &mut Vec<Vec<Key>>) {
    out.push(path.clone());
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                path.push(Key::Name(k.clone()));
                walk(x, path, out);
                path.pop();
            }
            let mut with = path.clone();
            with.push(Key::Name("zz_unknown".into()));
            out.push(with);
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                path.push(Key::Index(i));
                walk(x, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

fn at<'a>(v: &'a mut Value, path: &[Key]) -> &'a mut Value {
    path.iter().fold(v, |v, k| match (v, k) {
        (Value::Object(m), Key::Name(n)) => m.entry(n.clone()).or_insert(Value::Null),
        (Value::Array(a), Key::Index(i)) => &mut a[*i],
        (v, _) => v,
    })
}

#[test]
fn every_refusal_is_named_as_the_tracking_deserializer_names_it() {
    let (mut checked, mut differ) = (0, Vec::new());
    for (file, v) in common::vector_files() {
        for case in v["cases"].as_array().into_iter().flatten() {
            let input = &case["input"];
            // Free text alone has one path; the structured inputs have the rest.
            if input.as_object().is_some_and(|m| m.keys().all(|k| k == "text")) {
                continue;
            }
            let (arg, run): (&str, fn(&str) -> Refused) = match v["function"].as_str() {
                Some("classify") => ("evidence", |t| refusal(classify_json(t))),
                Some("next_action") => ("state", |t| refusal(next_action_json(t))),
                _ => continue,
            };
            for text in broken(input) {
                let want = if arg == "state" { tracked::<State>(&text, arg) } else { tracked::<Evidence>(&text, arg) };
                // Refused by the parse (a refusal of the policy's, after it, has no tracked path).
                let Some(want) = want else { continue };
                checked += 1;
                let got = run(&text);
                if got.as_ref().map(|(field, _)| field) != Some(&want) {
                    differ.push(format!("{file} {}: {text}\n  tracked {want:?}, named {got:?}", case["id"]));
                }
            }
        }
    }
    assert!(checked > 10_000, "only {checked} refusals checked");
    let first: Vec<&String> = differ.iter().take(20).collect();
    assert!(differ.is_empty(), "{} of {checked} differ, the first:\n{first:#?}", differ.len());
}
