//! The Rust embedding example of README.md, run as written. The test below
//! checks that the README holds this file's example verbatim.

// README example begins
use backstop::model::{Evidence, Situation, State, StepFailure, StepReport};
use backstop_host::Backstop;

fn seed_incident_decision() -> Result<(), Box<dyn std::error::Error>> {
    // Compile the component once (an empty linker: no WASI, no capabilities).
    let mut engine = Backstop::new()?;

    let evidence = Evidence {
        steps: vec![
            StepReport { id: "workflow-prep".into(), status: "success".into(), ..Default::default() },
            StepReport {
                id: "step-12-run-precommit".into(),
                status: "error".into(),
                error: Some("agent step failed: amplihack claude failed (exit 1)".into()),
                stdout: Some("API Error: 529 Overloaded. This is a server-side issue, usually temporary".into()),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let class = engine.classify(&evidence)?;
    println!("{} {:?}", class.class.as_str(), class.signal); // transient_transport Some("api error: 529")

    // The host passes the time and the randomness; Backstop decides.
    let state = State {
        now: 1_790_000_000_000, // ms since the Unix epoch
        entropy: 42,
        config: backstop::default_config(),
        situation: Situation::StepFailed(StepFailure { evidence, attempt: 1, waited: 0, elapsed: 0 }),
    };
    let decision = engine.next_action(&state)?.map_err(|e| e.to_string())?;
    eprintln!("{}", backstop::marker_line(&decision)); // backstop.failure_class {...}
    assert_eq!(decision.action.as_str(), "retry");
    assert!(decision.delay.unwrap() >= 5_000_000_000); // 10 s base, equal jitter: [5 s, 10 s]
    Ok(())
}
// README example ends

#[test]
fn readme_rust_example_runs() {
    seed_incident_decision().unwrap();
}

#[test]
fn readme_holds_the_example_verbatim() {
    let me = include_str!("readme_example.rs");
    let start = me.find("// README example begins\n").unwrap() + "// README example begins\n".len();
    let end = me.find("// README example ends").unwrap();
    let example = &me[start..end];
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    assert!(
        readme.contains(example),
        "README.md must contain the example of host-test/tests/readme_example.rs verbatim"
    );
}

#[test]
fn readme_holds_the_python_and_js_examples_verbatim() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    for f in ["host-py/tests/example.py", "host-js/test/example.mjs"] {
        let example = std::fs::read_to_string(format!("{}/../{f}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        assert!(readme.contains(&example), "README.md must contain {f} verbatim");
    }
}
