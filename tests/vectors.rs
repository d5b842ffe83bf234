//! Every vector file against the native core.

mod common;

use backstop::{Evidence, State};
use common::{run_all, Answer, Call};

fn native(call: Call) -> Answer {
    match call {
        Call::Classify(input) => {
            let e: Evidence = serde_json::from_value(input).map_err(|e| serde_json::json!({"parse": e.to_string()}))?;
            Ok(serde_json::to_value(backstop::classify(&e)).unwrap())
        }
        Call::NextAction(input) => {
            let s: State = serde_json::from_value(input).map_err(|e| serde_json::json!({"parse": e.to_string()}))?;
            match backstop::next_action(&s) {
                Ok(d) => Ok(serde_json::to_value(d).unwrap()),
                Err(e) => Err(serde_json::to_value(e).unwrap()),
            }
        }
        Call::Signature(detail, check) => Ok(serde_json::Value::String(backstop::signature(&detail, check.as_deref()))),
    }
}

#[test]
fn all_vectors_pass_natively() {
    let (count, failures) = run_all(&mut native);
    println!("native core: {count} vectors");
    assert!(count > 0, "no vectors found");
    assert!(failures.is_empty(), "{} of {count} vectors failed:\n{}", failures.len(), failures.join("\n"));
}

/// One reader: for every `step_failed` state of the vectors, `classify` of the
/// state's evidence under its configuration (`classify-with`; plain
/// `classify` where the configuration has no operator markers) says the class
/// the decision acts on.
#[test]
fn classify_and_next_action_agree_on_every_step_failed_vector() {
    let states = common::step_failed_states();
    assert!(states.len() > 50, "{}", states.len());
    let mut disagree = Vec::new();
    for (at, input) in &states {
        let s: State = serde_json::from_value(input.clone()).unwrap();
        let backstop::Situation::StepFailed(f) = &s.situation else { unreachable!() };
        let Ok(with) = backstop::classify_with_config(&f.evidence, &s.config) else { continue };
        let class = with.class;
        if s.config.classify.markers.is_empty() {
            assert_eq!(backstop::classify(&f.evidence).class, class, "{at}");
        }
        if let Ok(d) = backstop::next_action(&s) {
            if d.class != Some(class) {
                disagree.push(format!("{at}: classify {class:?}, next-action {:?}", d.class));
            }
        }
    }
    println!("classify and next-action compared on {} step_failed states", states.len());
    assert!(disagree.is_empty(), "{}", disagree.join("\n"));
}
