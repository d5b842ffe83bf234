//! The component's contract, through the wasmtime host: no imports, an empty
//! linker, every shared vector, and agreement with the native core.

#[path = "../../tests/common/mod.rs"]
mod common;

use backstop::model as m;
use backstop_host::{Backstop, HostError, Limits};
use common::{run_all, Answer, Call};
use serde_json::{json, Value};

fn native(call: &Call) -> Answer {
    match call {
        Call::Classify(input) => {
            let e: m::Evidence = serde_json::from_value(input.clone()).map_err(|e| json!({"parse": e.to_string()}))?;
            Ok(serde_json::to_value(backstop::classify(&e)).unwrap())
        }
        Call::NextAction(input) => {
            let s: m::State = serde_json::from_value(input.clone()).map_err(|e| json!({"parse": e.to_string()}))?;
            backstop::next_action(&s)
                .map(|d| serde_json::to_value(d).unwrap())
                .map_err(|e| serde_json::to_value(e).unwrap())
        }
        Call::Signature(detail, check) => Ok(Value::String(backstop::signature(detail, check.as_deref()))),
    }
}

fn component(b: &mut Backstop, call: &Call) -> Answer {
    match call {
        Call::Classify(input) => {
            let e: m::Evidence = serde_json::from_value(input.clone()).map_err(|e| json!({"parse": e.to_string()}))?;
            Ok(serde_json::to_value(b.classify(&e).expect("classify call")).unwrap())
        }
        Call::NextAction(input) => {
            let s: m::State = serde_json::from_value(input.clone()).map_err(|e| json!({"parse": e.to_string()}))?;
            match b.next_action(&s).expect("next-action call") {
                Ok(d) => {
                    // The record the component rendered is the same object as the data.
                    let record: Value = serde_json::from_str(&d.record_json).expect("record_json parses");
                    assert_eq!(record, serde_json::to_value(&d).unwrap(), "record_json differs from the decision");
                    Ok(serde_json::to_value(d).unwrap())
                }
                Err(e) => Err(serde_json::to_value(e).unwrap()),
            }
        }
        Call::Signature(detail, check) => {
            Ok(Value::String(b.signature(detail, check.as_deref()).expect("signature call")))
        }
    }
}

#[test]
fn component_imports_nothing_and_exports_the_engine() {
    let b = Backstop::new().unwrap();
    assert_eq!(b.imports(), Vec::<String>::new());
    let exports = b.exports();
    assert!(exports.iter().any(|e| e == concat!("backstop:policy/engine@", env!("CARGO_PKG_VERSION"))), "{exports:?}");
}

#[test]
fn all_vectors_pass_through_the_component_and_agree_with_native() {
    let mut b = Backstop::new().unwrap();
    let mut disagreements = Vec::new();
    let (count, failures) = run_all(&mut |call: Call| {
        let wasm = component(&mut b, &call);
        let nat = native(&call);
        if wasm != nat {
            disagreements.push(format!("component {wasm:?}\n   native {nat:?}"));
        }
        wasm
    });
    println!("component (wasmtime host): {count} vectors");
    // scripts/test compares this count with the Python and JavaScript hosts'.
    let _ =
        std::fs::write(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("vector-count-rust"), count.to_string());
    assert!(count > 0);
    assert!(failures.is_empty(), "{} of {count} vectors failed:\n{}", failures.len(), failures.join("\n"));
    assert!(disagreements.is_empty(), "component and native disagree:\n{}", disagreements.join("\n"));
}

/// A call through the JSON functions: the vector's JSON as text in, the
/// answer's text parsed back.
fn component_json(b: &mut Backstop, call: &Call) -> Answer {
    let parsed = |text: String| -> Value { serde_json::from_str(&text).expect("the component writes JSON") };
    match call {
        Call::Classify(input) => {
            b.classify_json(&input.to_string()).expect("classify-json call").map(parsed).map_err(error_json)
        }
        Call::NextAction(input) => {
            b.next_action_json(&input.to_string()).expect("next-action-json call").map(parsed).map_err(error_json)
        }
        Call::Signature(detail, check) => {
            Ok(Value::String(b.signature(detail, check.as_deref()).expect("signature call")))
        }
    }
}

fn error_json(e: m::PolicyError) -> Value {
    serde_json::to_value(e).unwrap()
}

/// Every vector through the JSON functions too, agreeing with the typed
/// functions call for call; `classify-with-json` on every `step_failed`
/// state agrees with `classify-with`.
#[test]
fn all_vectors_pass_through_the_json_functions_and_agree_with_the_typed_ones() {
    let mut b = Backstop::new().unwrap();
    let mut disagreements = Vec::new();
    let (count, failures) = run_all(&mut |call: Call| {
        let json = component_json(&mut b, &call);
        let typed = component(&mut b, &call);
        if json != typed {
            disagreements.push(format!("json  {json:?}\n typed {typed:?}"));
        }
        json
    });
    println!("component JSON functions (wasmtime host): {count} vectors");
    assert!(count > 0);
    assert!(failures.is_empty(), "{} of {count} vectors failed:\n{}", failures.len(), failures.join("\n"));
    assert!(disagreements.is_empty(), "JSON and typed functions disagree:\n{}", disagreements.join("\n"));
    let states = common::step_failed_states();
    for (at, input) in &states {
        let s: m::State = serde_json::from_value(input.clone()).unwrap();
        let m::Situation::StepFailed(f) = &s.situation else { unreachable!() };
        let evidence = input["situation"]["step_failed"].get("evidence").cloned().unwrap_or(json!({}));
        let config = input.get("config").cloned().unwrap_or(json!({}));
        let json = b.classify_with_json(&evidence.to_string(), &config.to_string()).unwrap();
        let typed = b.classify_with(&f.evidence, &s.config).unwrap();
        // The JSON functions write ASCII (`\u` escapes): the same value, other bytes.
        assert!(json.as_ref().map_or(true, |t| t.is_ascii()), "{at}: {json:?}");
        let read = json.map(|t| serde_json::from_str::<Value>(&t).unwrap());
        assert_eq!(read, typed.map(|c| serde_json::to_value(&c).unwrap()), "{at}");
    }
    assert_eq!(b.default_config_json().unwrap(), serde_json::to_string(&backstop::default_config()).unwrap());
    assert_eq!(b.info_json().unwrap(), serde_json::to_string(&backstop::info()).unwrap());
}

/// The JSON functions refuse what does not fit by its path, and an argument
/// over the bound by its name, as errors, never traps; the instance lives on.
#[test]
fn json_functions_refuse_by_path_and_bound_without_trapping() {
    let mut b = Backstop::new().unwrap();
    let bad = r#"{"situation": {"step_failed": {"attempt": 1, "waited": "12x"}}}"#;
    let Err(m::PolicyError::InvalidInput(f)) = b.next_action_json(bad).unwrap() else { panic!("accepted") };
    assert_eq!(f.field, "situation.step_failed.waited");
    let bad = r#"{"config": {"transport": {"max_attempts": true}}, "situation": {"step_failed": {"attempt": 1}}}"#;
    let Err(m::PolicyError::InvalidConfig(f)) = b.next_action_json(bad).unwrap() else { panic!("accepted") };
    assert_eq!(f.field, "config.transport.max_attempts");
    let long = format!(r#"{{"text": "{}"}}"#, "x".repeat(backstop::json::MAX_JSON_BYTES));
    let Err(m::PolicyError::InvalidInput(f)) = b.classify_json(&long).unwrap() else { panic!("accepted") };
    assert_eq!(f.field, "evidence");
    assert!(b.classify_json("{\"text\": \"socket hang up\"}").unwrap().unwrap().contains("transient_transport"));
}

#[test]
fn info_and_default_config_match_native() {
    let mut b = Backstop::new().unwrap();
    assert_eq!(b.info().unwrap(), backstop::info());
    assert_eq!(b.default_config().unwrap(), backstop::default_config());
}

#[test]
fn fuel_limit_names_the_limit_and_the_next_call_recovers() {
    let mut b =
        Backstop::from_bytes(backstop_host::COMPONENT, Limits { fuel: Some(10_000), ..Limits::default() }).unwrap();
    let big = m::Evidence::from_text("x".repeat(64 * 1024) + " API Error: 529");
    let err = b.classify(&big).unwrap_err();
    assert!(matches!(err, HostError::FuelLimit { limit: 10_000 }), "{err:?}");
    assert!(err.to_string().contains("fuel limit"), "{err}");
    b.set_limits(Limits { fuel: Some(10_000_000_000), ..Limits::default() }).unwrap();
    assert_eq!(b.classify(&big).unwrap().class, m::FailureClass::TransientTransport);
    assert_eq!(b.set_limits(Limits::default()), Err(HostError::MeteringFixed));
}

#[test]
fn deadline_names_the_limit_and_the_next_call_recovers() {
    let short = Limits { deadline: Some(std::time::Duration::from_millis(1)), ..Limits::default() };
    let mut b = Backstop::from_bytes(backstop_host::COMPONENT, short).unwrap();
    // 16 MiB read whole: tens of milliseconds of scanning, far past 1 ms.
    let config = m::Config {
        evidence: m::EvidenceConfig { scan_bytes: 16 << 20, ..Default::default() },
        ..backstop::default_config()
    };
    let huge = m::Evidence::from_text("z".repeat((16 << 20) - 20) + " API Error: 529");
    let err = b.classify_with(&huge, &config).unwrap_err();
    assert!(matches!(err, HostError::Deadline { limit } if limit.as_millis() == 1), "{err:?}");
    assert!(err.to_string().contains("deadline hit") && err.to_string().contains("1 ms"), "{err}");
    // A short call fits the same deadline; the default one fits the long call.
    // 1 ms is two epoch ticks, and a loaded machine can deschedule this
    // thread for longer than that: the instance recovers if one of a few
    // short calls comes back, each on a fresh instance after a trap.
    let small = m::Evidence::from_text("API Error: 529");
    let answers: Vec<_> = (0..5).map(|_| b.classify(&small)).collect();
    assert!(
        answers.iter().any(|a| matches!(a, Ok(c) if c.class == m::FailureClass::TransientTransport)),
        "no short call came back under the 1 ms deadline: {answers:?}"
    );
    assert!(
        answers.iter().all(|a| match a {
            Ok(c) => c.class == m::FailureClass::TransientTransport,
            Err(e) => matches!(e, HostError::Deadline { .. }),
        }),
        "{answers:?}"
    );
    b.set_limits(Limits::default()).unwrap();
    assert_eq!(b.classify_with(&huge, &config).unwrap().unwrap().class, m::FailureClass::TransientTransport);
}

#[test]
fn unmetered_component_answers_as_the_metered_one() {
    let mut metered =
        Backstop::from_bytes(backstop_host::COMPONENT, Limits { fuel: Some(10_000_000_000), ..Limits::default() })
            .unwrap();
    let mut unmetered = Backstop::new().unwrap();
    let e = m::Evidence::from_text("x".repeat(64 * 1024) + " API Error: 529");
    assert_eq!(metered.classify(&e).unwrap(), unmetered.classify(&e).unwrap());
}

#[test]
fn memory_limit_names_the_limit() {
    let mut b =
        Backstop::from_bytes(backstop_host::COMPONENT, Limits { memory_bytes: 2 << 20, ..Limits::default() }).unwrap();
    let big = m::Evidence::from_text("y".repeat(4 << 20));
    let err = b.classify(&big).unwrap_err();
    assert!(matches!(err, HostError::MemoryLimit { limit, .. } if limit == 2 << 20), "{err:?}");
    assert!(err.to_string().contains("memory limit"), "{err}");
}

#[test]
fn precompiled_artifact_is_written_then_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let (mut first, origin) = Backstop::cached(dir.path(), Limits::default()).unwrap();
    assert_eq!(origin, backstop_host::Origin::Compiled);
    let (mut second, origin) = Backstop::cached(dir.path(), Limits::default()).unwrap();
    assert_eq!(origin, backstop_host::Origin::Precompiled);
    let e = m::Evidence::from_text("socket hang up");
    assert_eq!(first.classify(&e).unwrap(), second.classify(&e).unwrap());
    drop((first, second));
    // A corrupt artifact is replaced, not trusted.
    for f in std::fs::read_dir(dir.path()).unwrap() {
        std::fs::write(f.unwrap().path(), b"not a cwasm").unwrap();
    }
    let (_, origin) = Backstop::cached(dir.path(), Limits::default()).unwrap();
    assert_eq!(origin, backstop_host::Origin::Compiled);
}

/// One reader, through the component: for every `step_failed` state of the
/// vectors, the component's `classify-with` of the evidence under the state's
/// configuration (and plain `classify` where it has no operator markers) says
/// the class its `next-action` acts on.
#[test]
fn component_classify_and_next_action_agree_on_every_step_failed_vector() {
    let mut b = Backstop::new().unwrap();
    let states = common::step_failed_states();
    assert!(states.len() > 50, "{}", states.len());
    let mut disagree = Vec::new();
    for (at, input) in &states {
        let s: m::State = serde_json::from_value(input.clone()).unwrap();
        let m::Situation::StepFailed(f) = &s.situation else { unreachable!() };
        let Ok(with) = b.classify_with(&f.evidence, &s.config).unwrap() else { continue };
        let class = with.class;
        if s.config.classify.markers.is_empty() {
            assert_eq!(b.classify(&f.evidence).unwrap().class, class, "{at}");
        }
        if let Ok(d) = b.next_action(&s).unwrap() {
            if d.class != Some(class) {
                disagree.push(format!("{at}: classify {class:?}, next-action {:?}", d.class));
            }
        }
    }
    assert!(disagree.is_empty(), "{}", disagree.join("\n"));
}

/// A component of another contract version is refused, and the error names
/// both versions: the bundled component with its version rewritten in place.
#[test]
fn a_component_of_another_contract_version_is_refused_naming_both() {
    let ours = env!("CARGO_PKG_VERSION");
    let theirs = "9.9.9";
    assert_eq!(ours.len(), theirs.len(), "the rewrite keeps every length");
    let needle = format!("@{ours}");
    let mut bytes = backstop_host::COMPONENT.to_vec();
    let mut at = 0;
    let mut rewritten = 0;
    while let Some(i) = bytes[at..].windows(needle.len()).position(|w| w == needle.as_bytes()) {
        bytes[at + i + 1..at + i + needle.len()].copy_from_slice(theirs.as_bytes());
        at += i + needle.len();
        rewritten += 1;
    }
    assert!(rewritten > 0, "the component names its version");
    let err = match Backstop::from_bytes(&bytes, Limits::default()) {
        Ok(_) => panic!("a component of contract {theirs} was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains(theirs) && err.contains(ours), "{err}");
    assert!(Backstop::from_bytes(backstop_host::COMPONENT, Limits::default()).is_ok());
}

/// Instances come from the engine's pool (`POOL_INSTANCES` at once): a fresh
/// instance beside the live one gets a slot of its own, and each torn-down
/// instance, after an answer or after a trap, returns its slot, so a host can
/// make fresh instances for as long as it lives.
#[test]
fn fresh_instances_return_their_pool_slots() {
    let small = m::Evidence::from_text("API Error: 529");
    let tight = Limits { memory_bytes: 2 << 20, ..Limits::default() };
    let mut b = Backstop::new().unwrap();
    for round in 0..3 * backstop_host::POOL_INSTANCES {
        b.set_limits(if round % 3 == 0 { tight } else { Limits::default() }).unwrap();
        if round % 3 == 0 {
            // A trap (the memory limit) tears the instance down mid-call.
            let err = b.classify(&m::Evidence::from_text("y".repeat(4 << 20))).unwrap_err();
            assert!(matches!(err, HostError::MemoryLimit { .. }), "round {round}: {err:?}");
        }
        let c = b.classify(&small).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(c.class, m::FailureClass::TransientTransport);
        // A second instance beside the live one takes a second slot.
        b.fresh_instance().unwrap_or_else(|e| panic!("round {round}: {e}"));
    }
}
