//! Configuration parsing and validation on arbitrary bytes: bytes -> serde ->
//! validate. Never panics; an error names a `config.` field and a rule; a
//! configuration that validates is usable by every situation.
#![no_main]

use backstop::model::*;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(config) = serde_json::from_slice::<Config>(data) else { return };
    // A config survives its own JSON round trip.
    let back: Config = serde_json::from_str(&serde_json::to_string(&config).unwrap()).expect("config round trip");
    assert_eq!(back, config);
    match backstop::config::validate(&config) {
        Err(PolicyError::InvalidConfig(e)) => {
            assert!(e.field.starts_with("config.") && !e.rule.is_empty(), "{e:?}");
        }
        Err(other) => panic!("validation gave a non-config error: {other:?}"),
        Ok(()) => {
            let breaker = config.breakers.first().map(|b| b.kind.clone()).unwrap_or_default();
            let situations = [
                Situation::StepFailed(StepFailure { evidence: Evidence::from_text("API Error: 529 Overloaded"), attempt: 1, waited: 0, elapsed: 0 }),
                Situation::WorkFailed(WorkFailure {
                    breaker,
                    actor: "a".into(),
                    history: vec![HistoryEvent { at: 0, kind: EventKind::Failure, breaker: String::new(), actor: "a".into(), detail: "error: x".into(), check: None, diagnosis: None }],
                }),
                Situation::TaskFailed(TaskFailure { failures: vec![1, 2, 3] }),
                Situation::CycleEntered(CycleEntry { name: "c".into(), count: 2 }),
                Situation::RunStopped(RunStop { code: "TIMEOUT".into(), ..Default::default() }),
            ];
            for situation in situations {
                let state = State { now: 1_790_000_000_000, entropy: 7, config: config.clone(), situation };
                if let Err(PolicyError::InvalidConfig(e)) = backstop::next_action(&state) {
                    panic!("a validated config is rejected by next_action: {e:?}");
                }
            }
        }
    }
});
