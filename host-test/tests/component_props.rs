//! Arbitrary inputs through the component in the wasmtime host: it never
//! traps or hits a limit, and it answers exactly as the native core does
//! (byte-identical records). One compiled component serves the whole binary.

use std::sync::{Mutex, MutexGuard, OnceLock};

use backstop::markers::{is_text, tables, MarkerMatch};
use backstop::model as m;
use backstop_host::Backstop;
use proptest::prelude::*;
use proptest::sample::select;

fn component() -> MutexGuard<'static, Backstop> {
    static B: OnceLock<Mutex<Backstop>> = OnceLock::new();
    B.get_or_init(|| Mutex::new(Backstop::new().expect("the component loads")))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

fn cases(n: u32) -> ProptestConfig {
    ProptestConfig { cases: n, failure_persistence: None, ..ProptestConfig::default() }
}

/// Any text: arbitrary chars (NUL, controls, surrogate-free Unicode), the
/// markers of the tables, or a mix of both.
fn text() -> impl Strategy<Value = String> {
    let markers: Vec<String> =
        tables().markers().filter(|m| is_text(m.kind)).map(|m| m.marker.replace('#', "42")).collect();
    let verdicts: Vec<String> =
        tables().markers().filter(|m| m.kind == MarkerMatch::Line).map(|m| m.marker.to_ascii_uppercase()).collect();
    let piece = prop_oneof![
        prop::collection::vec(any::<char>(), 0..60).prop_map(String::from_iter),
        select(markers),
        select(verdicts),
        select(vec![
            "\n",
            "\r\n",
            "\0",
            " ",
            "resets 12:50am (America/Los_Angeles)",
            "usage limit reached|1790007200",
            "try again in 5 hours"
        ])
        .prop_map(str::to_string),
    ];
    prop::collection::vec(piece, 0..8).prop_map(|v| v.concat())
}

fn opt_text() -> impl Strategy<Value = Option<String>> {
    prop::option::of(text())
}

fn header() -> impl Strategy<Value = m::Header> {
    let names = select(vec![
        "retry-after",
        "Retry-After",
        "retry-after-ms",
        "x-should-retry",
        "anthropic-ratelimit-unified-status",
        "anthropic-ratelimit-unified-reset",
        "date",
    ]);
    let values = prop_oneof![
        select(vec![
            "0",
            "7",
            "7200",
            "true",
            "false",
            "rejected",
            "1790007200",
            "Wed, 21 Oct 2026 07:28:00 GMT",
            "-1",
            "1e9",
            "soon",
            "18446744073709551616"
        ])
        .prop_map(str::to_string),
        ".{0,30}",
    ];
    (names, values).prop_map(|(n, v)| m::Header { name: n.into(), value: v })
}

fn step() -> impl Strategy<Value = m::StepReport> {
    (
        ".{0,20}",
        select(vec!["success", "error", "failed", "ok", ""]),
        opt_text(),
        opt_text(),
        opt_text(),
        prop::option::of(any::<i32>()),
        prop::option::of(select(vec!["SIGKILL", "SIGTERM", ""])),
    )
        .prop_map(|(id, status, error, stdout, stderr, exit_code, signal)| m::StepReport {
            id,
            status: status.into(),
            error,
            output: None,
            stdout,
            stderr,
            exit_code,
            signal: signal.map(str::to_string),
        })
}

fn evidence() -> impl Strategy<Value = m::Evidence> {
    let codes: Vec<String> =
        tables().markers().filter(|m| m.kind == MarkerMatch::Code).map(|m| m.marker.to_string()).collect();
    (
        prop::collection::vec(step(), 0..3),
        opt_text(),
        prop::option::of(any::<i32>()),
        opt_text(),
        prop::option::of(prop_oneof![any::<u16>(), select(vec![401u16, 403, 408, 413, 429, 500, 502, 503, 504, 529])]),
        prop::option::of(select(codes.clone())),
        prop::option::of(prop_oneof![select(codes), ".{0,12}"]),
        prop::collection::vec(header(), 0..3),
    )
        .prop_map(|(steps, text, exit_code, runner_stderr, http_status, error_type, error_code, headers)| {
            m::Evidence {
                steps,
                text,
                exit_code,
                signal: None,
                run_status: None,
                runner_stderr,
                http_status,
                error_type,
                error_code,
                headers,
            }
        })
}

fn event() -> impl Strategy<Value = m::HistoryEvent> {
    let kinds = select(vec![
        m::EventKind::Failure,
        m::EventKind::Failure,
        m::EventKind::Failure,
        m::EventKind::Success,
        m::EventKind::CycleReset,
        m::EventKind::Reclassified,
        m::EventKind::ManualUnblock,
        m::EventKind::ForceOpen,
        m::EventKind::ForceClose,
        m::EventKind::Reset,
    ]);
    (
        kinds,
        select(vec!["", "build", "review"]),
        select(vec!["builder", "inspector"]),
        text(),
        prop::option::of(select(vec!["lint", "tests"])),
        prop::option::of(select(vec!["", "rebased"])),
    )
        .prop_map(|(kind, breaker, actor, detail, check, diagnosis)| m::HistoryEvent {
            at: 0,
            kind,
            breaker: breaker.into(),
            actor: actor.into(),
            detail,
            check: check.map(str::to_string),
            diagnosis: diagnosis.map(str::to_string),
        })
}

fn situation() -> impl Strategy<Value = m::Situation> {
    let code = prop_oneof![
        select(backstop::resume::ALLOW_LIST.to_vec()).prop_map(str::to_string),
        select(vec!["rate-limited", "AUTH_FAILED", "", "NEW"]).prop_map(str::to_string),
        ".{0,70}",
    ];
    prop_oneof![
        (evidence(), 0u32..=12, prop_oneof![0u64..=400_000_000_000, any::<u64>()]).prop_map(
            |(evidence, attempt, waited)| m::Situation::StepFailed(m::StepFailure {
                evidence,
                attempt,
                waited,
                elapsed: 0
            })
        ),
        (select(vec!["build", "review", "nope"]), prop::collection::vec(event(), 0..16)).prop_map(|(b, history)| {
            m::Situation::WorkFailed(m::WorkFailure { breaker: b.into(), actor: "builder".into(), history })
        }),
        prop::collection::vec(any::<u64>(), 0..6)
            .prop_map(|failures| m::Situation::TaskFailed(m::TaskFailure { failures })),
        (".{0,20}", 0u32..5).prop_map(|(name, count)| m::Situation::CycleEntered(m::CycleEntry { name, count })),
        (
            code,
            0u32..6,
            prop::option::of(0u64..100),
            prop::option::of(0u64..100),
            prop::collection::vec(prop::option::of(0u32..=200), 0..3),
            prop::option::of(evidence())
        )
            .prop_map(|(code, resumes_done, tripped, effect, quota, evidence)| m::Situation::RunStopped(
                m::RunStop {
                    code,
                    resumes_done,
                    budget_cap: None,
                    budget_tripped_at: tripped,
                    budget_in_effect: effect,
                    quota: quota
                        .into_iter()
                        .map(|p| m::QuotaReading { window: "5h".into(), percent: p.map(f64::from), resets_at: None })
                        .collect(),
                    evidence,
                }
            )),
    ]
}

fn state() -> impl Strategy<Value = m::State> {
    (any::<u64>(), any::<u64>(), 0u32..=4, 0u32..=11, 0u32..=3000, situation()).prop_map(
        |(now, entropy, max_resumes, max_attempts, scan, situation)| {
            let mut config = m::Config::default();
            config.resume.max_resumes = max_resumes;
            config.transport.max_attempts = max_attempts; // 0 and 11 are out of bounds
            config.evidence.scan_bytes = scan.max(200); // below 256 is out of bounds
            config.evidence.echo_bytes = scan / 3;
            m::State { now, entropy, config, situation }
        },
    )
}

proptest! {
    #![proptest_config(cases(64))]

    #[test]
    fn classify_through_the_component_never_traps_and_agrees(e in evidence()) {
        let got = component().classify(&e);
        prop_assert!(got.is_ok(), "host error: {:?}", got);
        prop_assert_eq!(got.unwrap(), backstop::classify(&e));
    }

    #[test]
    fn next_action_through_the_component_never_traps_and_agrees(s in state()) {
        let got = component().next_action(&s);
        prop_assert!(got.is_ok(), "host error: {:?}", got);
        let got = got.unwrap();
        let native = backstop::next_action(&s);
        match (&got, &native) {
            (Ok(a), Ok(b)) => prop_assert_eq!(&a.record_json, &b.record_json),
            (Err(a), Err(b)) => prop_assert_eq!(a, b),
            _ => prop_assert!(false, "component {:?} vs native {:?}", got, native),
        }
        prop_assert_eq!(got, native);
    }

    #[test]
    fn signature_through_the_component_never_traps_and_agrees(detail in text(), check in prop::option::of(".{0,80}")) {
        let got = component().signature(&detail, check.as_deref());
        prop_assert!(got.is_ok(), "host error: {:?}", got);
        prop_assert_eq!(got.unwrap(), backstop::signature(&detail, check.as_deref()));
    }
}
