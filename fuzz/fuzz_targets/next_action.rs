//! `next_action` on arbitrary JSON state bytes: bytes -> serde -> next_action.
//! Never panics; an answer is a sealed record that parses back to itself and
//! is byte-identical on a second call; an error names a field and a rule.
#![no_main]

use backstop::model::{Action, FailureClass, PolicyError, State};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(state) = serde_json::from_slice::<State>(data) else { return };
    match backstop::next_action(&state) {
        Ok(d) => {
            let again = backstop::next_action(&state).expect("same state, same answer");
            assert_eq!(d.record_json, again.record_json, "deterministic record");
            let v: serde_json::Value = serde_json::from_str(&d.record_json).expect("record parses");
            assert_eq!(v, serde_json::to_value(&d).unwrap());
            // Never wrong in the dangerous direction.
            if d.action == Action::Retry {
                assert!(matches!(d.class, Some(FailureClass::TransientTransport | FailureClass::Indeterminate | FailureClass::UsageLimit)), "{}", d.record_json);
                assert!(d.delay.is_some());
            }
            if matches!(d.class, Some(FailureClass::Work | FailureClass::Environmental)) {
                assert!(!matches!(d.action, Action::Retry | Action::Resume), "{}", d.record_json);
            }
        }
        Err(PolicyError::InvalidConfig(e)) | Err(PolicyError::InvalidInput(e)) => {
            assert!(!e.field.is_empty() && !e.rule.is_empty(), "{e:?}");
        }
    }
});
