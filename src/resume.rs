//! Run-level auto-resume (the second layer; the first is the per-step
//! transport retry in `transport.rs`, bounded by `transport.max_attempts`).
//!
//! A whole run stopped in a resumable state with an error code. The answer is
//! `resume` (after `delay`, at `resume_at`, with a `run_auto_resumed` record)
//! or a stop whose reasoning says why and what a human can do. In order:
//!
//! 1. Input bounds: the code at most [`MAX_CODE`] bytes after trimming; at most
//!    [`MAX_READINGS`] quota readings, each window name at most 64 bytes and
//!    each percent finite and >= 0 (NaN, infinities and negatives are
//!    `invalid-input`: a broken reading is a host bug to surface, not an
//!    "unknown" to proceed on); the budget cap name at most 64 bytes.
//! 2. The code, trimmed, ASCII upper-cased, `-` and spaces read as `_`: only the
//!    allow-list resumes: `EXECUTION_FAILED` (transient: only when the evidence
//!    shows a transient fault), `BUDGET_EXCEEDED`, `TIMEOUT`, `RATE_LIMITED`,
//!    `NETWORK_TRANSIENT`, `TOOL_FAILED_TRANSIENT`, `USAGE_LIMIT_REACHED` (and
//!    iterion's `USAGE_LIMIT_BLOCKED`, the same). Everything else, an empty code
//!    and any code not known fail closed (`terminal`).
//! 3. The evidence, when given, is classified: `work` or `environmental`
//!    evidence vetoes a resume (a spent quota reported as `RATE_LIMITED` must
//!    not be resumed as a rate limit); `usage-limit` evidence (or the header
//!    `anthropic-ratelimit-unified-status: rejected`) makes it a usage-limit
//!    wait. `BUDGET_EXCEEDED` ignores the evidence. `x-should-retry` is a
//!    per-request hint for the transport layer and is not read here.
//! 4. Off by default: `max_resumes` 0 stops, saying so.
//! 5. The count: `resumes_done >= max_resumes` gives `terminal-budget-exhausted`.
//! 6. `BUDGET_EXCEEDED` resumes only when `budget_in_effect > budget_tripped_at`
//!    (both known); otherwise it stops naming the cap to raise. A host that
//!    re-trips the raised cap reports the new value as `budget_tripped_at`, so
//!    each raise buys one resume and the same cap never loops.
//! 7. The wait:
//!    - a usage limit waits for its reset: the header
//!      `anthropic-ratelimit-unified-reset`, else `retry-after-ms` /
//!      `retry-after`, else an instant in the text (an epoch, or a date-time
//!      with an explicit offset), else a relative reset in the text (`try again
//!      in 5 hours`, from `now`) — plus `reset_margin`; reason
//!      `usage-limit-reset`. A wait beyond `max_reset_wait` stops. A reset hint
//!      with no unambiguous instant (`resets 1pm (Etc/GMT+5)`) is quoted and
//!      never turned into an instant; the resume then waits the longest backoff
//!      (`max_delay`, equal jitter), reason `usage-limit-unknown-reset`: a resume
//!      into a limit that has not reset fails fast and the count bounds it;
//!    - otherwise capped exponential backoff `base_delay × 2^resumes_done`,
//!      capped at `max_delay`, equal jitter from `entropy`; reason `auto`. A
//!      server `retry-after` longer than that is waited instead (a floor at this
//!      level, never a way to resume sooner), reason `server-hint`; beyond
//!      `max_reset_wait` it stops.
//! 8. The quota cap: any known reading at or above `quota_cap_percent` stops
//!    (`terminal`), naming every window and value; the run stays resumable for
//!    later. Unknown readings never block. Readings are as of `now`: a usage
//!    limit's own window is still full, so a reading that carries `resets_at`
//!    at or before the resume instant does not block (the window is empty
//!    again when the run resumes).

use crate::backoff;
use crate::classify::{classify_with, head, Options};
use crate::config::human;
use crate::hints;
use crate::model::*;
use crate::reset;
use crate::transport::{blank, from_classification, later};

/// A run-stop code longer than this (after trimming) is invalid input.
pub const MAX_CODE: usize = 64;
/// At most this many quota readings.
pub const MAX_READINGS: usize = 16;
/// Longest window or cap name.
pub const MAX_NAME: usize = 64;

/// The codes that may resume automatically.
pub const ALLOW_LIST: [&str; 8] = [
    "EXECUTION_FAILED",
    "BUDGET_EXCEEDED",
    "TIMEOUT",
    "RATE_LIMITED",
    "NETWORK_TRANSIENT",
    "TOOL_FAILED_TRANSIENT",
    "USAGE_LIMIT_REACHED",
    "USAGE_LIMIT_BLOCKED",
];

/// Codes known to fail closed, with why.
const FAIL_CLOSED: [(&str, &str); 15] = [
    ("SCHEMA_VALIDATION", "the output broke its schema; the same run produces it again"),
    ("SCHEMA_UNUSABLE", "the schema itself cannot be used"),
    ("AUTH_FAILED", "the credentials need a human"),
    ("WORKSPACE_SAFETY", "a workspace-safety guard stopped the run"),
    ("LOOP_EXHAUSTED", "the loop spent its iterations; resuming would loop again"),
    ("FAIL_NODE", "the workflow failed on purpose at a fail node"),
    ("FAILNODE", "the workflow failed on purpose at a fail node"),
    ("USER_CANCELLED", "a person cancelled the run"),
    ("USER_CANCELED", "a person cancelled the run"),
    ("HUMAN_PAUSED", "a person paused the run; a person resumes it"),
    ("TOOL_FAILED_PERMANENT", "the tool failure is permanent"),
    ("MODEL_UNAVAILABLE", "the model is not available to this client"),
    ("CONTEXT_LENGTH_EXCEEDED", "the input is too long; the same input fails again"),
    ("AMBIGUOUS_EFFECT", "replaying could repeat a side effect that may already have happened"),
    ("UNCLASSIFIED", "nothing identifies the failure"),
];

const LEAVE: &str = "leaving the run stopped and resumable for manual review";

/// The code as matched: trimmed, ASCII upper case, `-` and space as `_`.
pub fn normalize(code: &str) -> String {
    code.trim().chars().map(|c| if c == '-' || c == ' ' { '_' } else { c.to_ascii_uppercase() }).collect()
}

fn is_usage_code(code: &str) -> bool {
    code == "USAGE_LIMIT_REACHED" || code == "USAGE_LIMIT_BLOCKED"
}

fn validate(r: &RunStop) -> Result<(), PolicyError> {
    if r.code.trim().len() > MAX_CODE {
        return Err(PolicyError::input("situation.run_stopped.code", format!("at most {MAX_CODE} bytes")));
    }
    if r.quota.len() > MAX_READINGS {
        return Err(PolicyError::input("situation.run_stopped.quota", format!("at most {MAX_READINGS} readings")));
    }
    for (i, q) in r.quota.iter().enumerate() {
        if q.window.len() > MAX_NAME {
            return Err(PolicyError::input(
                format!("situation.run_stopped.quota[{i}].window"),
                format!("at most {MAX_NAME} bytes"),
            ));
        }
        if let Some(p) = q.percent {
            if !p.is_finite() || p < 0.0 {
                return Err(PolicyError::input(
                    format!("situation.run_stopped.quota[{i}].percent"),
                    "a finite number of at least 0 (none when unknown)",
                ));
            }
        }
    }
    if r.budget_cap.as_deref().is_some_and(|c| c.len() > MAX_NAME) {
        return Err(PolicyError::input("situation.run_stopped.budget_cap", format!("at most {MAX_NAME} bytes")));
    }
    Ok(())
}

/// The quota readings as `5h=90%, 7d=unknown`.
fn readings(r: &RunStop) -> String {
    r.quota
        .iter()
        .map(|q| {
            let w = if q.window.trim().is_empty() { "window" } else { q.window.trim() };
            match q.percent {
                Some(p) => format!("{w}={p}%"),
                None => format!("{w}=unknown"),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A stop: `blank` or carrying the evidence's classification.
fn stop(action: Action, c: Option<&Classification>, why: String) -> Decision {
    match c {
        Some(c) => from_classification(action, c, why),
        None => blank(action, why),
    }
}

pub fn decide(now: Timestamp, entropy: u64, config: &Config, r: &RunStop) -> Result<Decision, PolicyError> {
    validate(r)?;
    let rc = &config.resume;
    let code = normalize(&r.code);
    let shown = if code.is_empty() { "no error code".to_string() } else { format!("code {code}") };
    let mut d = decide_inner(now, entropy, config, r, &code, &shown);
    d.attempt = r.resumes_done.saturating_add(1);
    d.max_attempts = rc.max_resumes;
    Ok(d)
}

fn decide_inner(now: Timestamp, entropy: u64, config: &Config, r: &RunStop, code: &str, shown: &str) -> Decision {
    let rc = &config.resume;

    // 2. The allow-list.
    if !ALLOW_LIST.contains(&code) {
        let why = match FAIL_CLOSED.iter().find(|(k, _)| *k == code) {
            Some((_, why)) => why.to_string(),
            None if code.is_empty() => "an unclassified stop fails closed".to_string(),
            None => "an unknown code fails closed".to_string(),
        };
        let c = r.evidence.as_ref().map(|e| classify_with(e, &Options::from_config(config)));
        return stop(Action::Terminal, c.as_ref(), format!("not auto-recoverable ({shown}): {why} — {LEAVE}"));
    }

    // 3. The evidence.
    let budget = code == "BUDGET_EXCEEDED";
    let c = if budget { None } else { r.evidence.as_ref().map(|e| classify_with(e, &Options::from_config(config))) };
    let h = match (&r.evidence, budget) {
        (Some(e), false) => hints::read(&e.headers, now),
        _ => hints::Hints::default(),
    };
    if let Some(c) = &c {
        if matches!(c.class, FailureClass::Work | FailureClass::Environmental) {
            let why = format!(
                "not auto-recoverable ({shown}): the evidence is classified `{}` (signal {:?}), which a resume meets again — {LEAVE}",
                c.class.as_str(),
                c.signal.as_deref().unwrap_or("")
            );
            let mut d = from_classification(Action::Terminal, c, why);
            d.retryable = false;
            return d;
        }
    }
    let usage = is_usage_code(code)
        || c.as_ref().is_some_and(|c| c.class == FailureClass::UsageLimit)
        || h.unified_rejected.is_some();
    if code == "EXECUTION_FAILED" && !usage && !c.as_ref().is_some_and(|c| c.class == FailureClass::TransientTransport)
    {
        let what = match &c {
            Some(c) => format!("the evidence is classified `{}`", c.class.as_str()),
            None => "no evidence was given".to_string(),
        };
        let why = format!(
            "not auto-recoverable ({shown}): EXECUTION_FAILED resumes only when its evidence shows a transient fault, and {what} — {LEAVE}"
        );
        return stop(Action::Terminal, c.as_ref(), why);
    }
    let fact = |action: Action, why: String| {
        let mut d = stop(action, c.as_ref(), why);
        d.retryable = true;
        d
    };

    // 4. Off.
    if rc.max_resumes == 0 {
        return fact(
            Action::Terminal,
            format!(
                "auto-resume is off (config.resume.max_resumes is 0): {shown} is auto-recoverable, but nothing resumes it automatically — resume it by hand, or set config.resume.max_resumes"
            ),
        );
    }

    // 5. The count.
    if r.resumes_done >= rc.max_resumes {
        return fact(
            Action::TerminalBudgetExhausted,
            format!(
                "auto-resume bound reached: {} of {} automatic resumes made (config.resume.max_resumes = {}) for {shown} — {LEAVE}",
                r.resumes_done, rc.max_resumes, rc.max_resumes
            ),
        );
    }

    // 6. The budget.
    let cap = r.budget_cap.as_deref().map(str::trim).filter(|s| !s.is_empty());
    let cap_name = cap.unwrap_or("the budget cap");
    let mut raised = String::new();
    if budget {
        match (r.budget_tripped_at, r.budget_in_effect) {
            (Some(t), Some(e)) if e > t => {
                raised = format!("{cap_name} raised from {t} to {e}, so it does not trip again at once; ")
            }
            (t, e) => {
                let values = match (t, e) {
                    (Some(t), Some(e)) => format!("tripped at {t}, {e} in effect"),
                    (Some(t), None) => format!("tripped at {t}, no raised value reported"),
                    _ => "no raised value reported".to_string(),
                };
                let above = t.map(|t| format!(" above {t}")).unwrap_or_default();
                return fact(
                    Action::Terminal,
                    format!(
                        "budget exceeded and no raised cap in effect ({cap_name}: {values}) — not resuming, which would trip the same cap again; raise {cap_name}{above} and resume"
                    ),
                );
            }
        }
    }

    // 7. The wait.
    let mut reset_hint = c.as_ref().and_then(|c| c.reset_hint.clone());
    let mut server_hint: Option<String> = None;
    let (delay, reason, how) = if usage {
        let quoted = reset_hint.as_deref().map(|q| format!(" (`{q}`)")).unwrap_or_default();
        let known: Option<(Timestamp, String)> = if let Some((at, q)) = &h.unified_reset {
            server_hint = Some(q.clone());
            Some((*at, format!("the server gives the reset as {} (`{q}`)", reset::format_utc(*at))))
        } else if let Some(w) = &h.wait {
            server_hint = Some(w.hint.clone());
            Some((later(now, w.delay), format!("the server asks to wait {} (`{}`)", human(w.delay), w.hint)))
        } else if let Some(at) = c.as_ref().and_then(|c| c.reset_at) {
            Some((at, format!("the limit resets at {}{quoted}", reset::format_utc(at))))
        } else {
            c.as_ref()
                .and_then(|c| c.reset_after)
                .map(|after| (later(now, after), format!("the limit resets {} from now{quoted}", human(after))))
        };
        match known {
            Some((at, said)) => {
                let until = at.saturating_sub(now).saturating_mul(NANOS_PER_MILLI);
                let delay = until.saturating_add(rc.reset_margin);
                if delay > rc.max_reset_wait {
                    let mut d = fact(
                        Action::Terminal,
                        format!(
                            "usage limit ({shown}): {said}, a wait of {} with the margin, beyond config.resume.max_reset_wait ({}) — not scheduling it; the run stays resumable: resume it by hand after the reset",
                            human(delay),
                            human(rc.max_reset_wait)
                        ),
                    );
                    d.server_hint = server_hint;
                    return d;
                }
                let past = if until == 0 { " (already passed)" } else { "" };
                (
                    delay,
                    "usage-limit-reset",
                    format!(
                        "usage limit: {said}{past}; resuming at the reset plus the {} margin",
                        human(rc.reset_margin)
                    ),
                )
            }
            None => {
                let delay = backoff::equal_jitter(rc.max_delay, backoff::draw(entropy, r.resumes_done as u64));
                let said = match reset_hint.as_deref() {
                    Some(q) => format!(
                        "the reset is given as `{q}`, which names no unambiguous instant (no UTC offset or epoch), so no resume time is computed from it"
                    ),
                    None => "the evidence gives no reset time".to_string(),
                };
                (
                    delay,
                    "usage-limit-unknown-reset",
                    format!("usage limit: {said}; trying again after the longest backoff (config.resume.max_delay {}, equal jitter) — a resume before the reset fails fast and counts against max_resumes", human(rc.max_delay)),
                )
            }
        }
    } else {
        let planned = backoff::delay(rc.base_delay, 2, r.resumes_done, rc.max_delay, entropy);
        match &h.wait {
            Some(w) if w.delay > planned => {
                if w.delay > rc.max_reset_wait {
                    let mut d = fact(
                        Action::Terminal,
                        format!(
                            "{shown}: the server asks to wait {} (`{}`), beyond config.resume.max_reset_wait ({}) — not scheduling it; the run stays resumable: resume it by hand later",
                            human(w.delay),
                            w.hint,
                            human(rc.max_reset_wait)
                        ),
                    );
                    d.server_hint = Some(w.hint.clone());
                    return d;
                }
                server_hint = Some(w.hint.clone());
                (
                    w.delay,
                    "server-hint",
                    format!("the server asks to wait {} (`{}`), longer than the backoff", human(w.delay), w.hint),
                )
            }
            _ => (
                planned,
                "auto",
                format!(
                    "capped exponential backoff (base {}, cap {}, equal jitter)",
                    human(rc.base_delay),
                    human(rc.max_delay)
                ),
            ),
        }
    };

    // 8. The quota cap. A full window that resets by the time of the resume
    // does not block it.
    let cap_pct = rc.quota_cap_percent as f64;
    let resume_at = later(now, delay);
    let cleared = |q: &QuotaReading| q.resets_at.is_some_and(|t| t <= resume_at);
    let over: Vec<&QuotaReading> =
        r.quota.iter().filter(|q| q.percent.is_some_and(|p| p >= cap_pct) && !cleared(q)).collect();
    if !over.is_empty() {
        let windows: Vec<String> =
            over.iter().map(|q| format!("{}={}%", q.window.trim(), q.percent.unwrap_or(0.0))).collect();
        let mut d = fact(
            Action::Terminal,
            format!(
                "quota cap {}% reached ({}; all readings: {}) — not resuming now, which would draw quota past the cap; {shown} is auto-recoverable and the run stays resumable: resume it later, when the usage has fallen",
                rc.quota_cap_percent,
                windows.join(", "),
                readings(r)
            ),
        );
        d.server_hint = server_hint;
        return d;
    }
    let resetting: Vec<String> = r
        .quota
        .iter()
        .filter(|q| q.percent.is_some_and(|p| p >= cap_pct) && cleared(q))
        .map(|q| format!("{} resets at {}", q.window.trim(), reset::format_utc(q.resets_at.unwrap_or(0))))
        .collect();
    let quota_note = if !resetting.is_empty() {
        format!(
            "; quota at or over the {}% cap only in windows that reset before the resume ({}; readings: {})",
            rc.quota_cap_percent,
            resetting.join(", "),
            readings(r)
        )
    } else if r.quota.is_empty() {
        String::new()
    } else if r.quota.iter().any(|q| q.percent.is_none()) {
        format!(
            "; quota under the {}% cap where known ({}; an unknown reading never blocks: the count bounds the loop)",
            rc.quota_cap_percent,
            readings(r)
        )
    } else {
        format!("; quota under the {}% cap ({})", rc.quota_cap_percent, readings(r))
    };

    let attempt = r.resumes_done + 1;
    let why = format!(
        "{shown} is auto-recoverable: {raised}automatic resume {attempt} of {} after {} ({how}){quota_note}{}",
        rc.max_resumes,
        human(delay),
        h.ignored_note()
    );
    let mut d = fact(Action::Resume, why);
    if d.reset_hint.is_none() {
        d.reset_hint = reset_hint.take();
    }
    d.delay = Some(delay);
    d.resume_at = Some(resume_at);
    d.server_hint = server_hint;
    d.run_auto_resumed = Some(RunAutoResumed {
        attempt,
        max: rc.max_resumes,
        code: head(code, MAX_CODE).to_string(),
        delay,
        reason: reason.to_string(),
    });
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Timestamp = 1_790_000_000_000;
    const SEC: u64 = NANOS_PER_SEC;

    fn on(n: u32) -> Config {
        let mut c = Config::default();
        c.resume.max_resumes = n;
        c
    }

    fn run(code: &str, done: u32) -> RunStop {
        RunStop { code: code.into(), resumes_done: done, ..Default::default() }
    }

    fn text(code: &str, done: u32, t: &str) -> RunStop {
        RunStop { evidence: Some(Evidence::from_text(t)), ..run(code, done) }
    }

    #[test]
    fn off_by_default() {
        let d = decide(NOW, 1, &Config::default(), &run("RATE_LIMITED", 0)).unwrap();
        assert_eq!(d.action, Action::Terminal);
        assert!(d.reasoning.contains("auto-resume is off"), "{}", d.reasoning);
        assert!(d.run_auto_resumed.is_none());
    }

    #[test]
    fn every_allow_listed_code_resumes_up_to_n_and_not_beyond() {
        for code in [
            "BUDGET_EXCEEDED",
            "TIMEOUT",
            "RATE_LIMITED",
            "NETWORK_TRANSIENT",
            "TOOL_FAILED_TRANSIENT",
            "USAGE_LIMIT_REACHED",
            "usage_limit_blocked",
            " execution-failed ",
        ] {
            let mut r = text(code, 0, "read tcp 10.0.0.1:443: connection reset by peer");
            r.budget_tripped_at = Some(3600);
            r.budget_in_effect = Some(7200);
            for done in 0..3 {
                r.resumes_done = done;
                let d = decide(NOW, 9, &on(3), &r).unwrap();
                assert_eq!(d.action, Action::Resume, "{code} {done}: {}", d.reasoning);
                let a = d.run_auto_resumed.unwrap();
                assert_eq!((a.attempt, a.max), (done + 1, 3));
                assert_eq!(a.code, normalize(code));
                assert_eq!(d.resume_at, Some(later(NOW, d.delay.unwrap())));
            }
            r.resumes_done = 3;
            let d = decide(NOW, 9, &on(3), &r).unwrap();
            assert_eq!(d.action, Action::TerminalBudgetExhausted, "{code}");
            assert!(d.reasoning.contains("3 of 3"), "{}", d.reasoning);
        }
    }

    #[test]
    fn everything_else_fails_closed() {
        for code in [
            "SCHEMA_VALIDATION",
            "AUTH_FAILED",
            "WORKSPACE_SAFETY",
            "LOOP_EXHAUSTED",
            "FAIL_NODE",
            "USER_CANCELLED",
            "HUMAN_PAUSED",
            "TOOL_FAILED_PERMANENT",
            "",
            "   ",
            "SOMETHING_NEW",
        ] {
            let d = decide(NOW, 1, &on(5), &run(code, 0)).unwrap();
            assert_eq!(d.action, Action::Terminal, "{code}");
            assert!(d.reasoning.starts_with("not auto-recoverable ("), "{}", d.reasoning);
            assert!(!d.retryable);
        }
        let d = decide(NOW, 1, &on(5), &run("SOMETHING_NEW", 0)).unwrap();
        assert!(d.reasoning.contains("code SOMETHING_NEW") && d.reasoning.contains("unknown code"), "{}", d.reasoning);
    }

    #[test]
    fn long_codes_and_bad_readings_are_invalid_input() {
        let e = decide(NOW, 1, &on(5), &run(&"X".repeat(65), 0)).unwrap_err();
        assert!(matches!(e, PolicyError::InvalidInput(f) if f.field == "situation.run_stopped.code"));
        for p in [f64::NAN, f64::INFINITY, -1.0] {
            let mut r = run("TIMEOUT", 0);
            r.quota = vec![QuotaReading { window: "5h".into(), percent: Some(p), resets_at: None }];
            let e = decide(NOW, 1, &on(5), &r).unwrap_err();
            assert!(matches!(e, PolicyError::InvalidInput(f) if f.field == "situation.run_stopped.quota[0].percent"));
        }
        let mut r = run("TIMEOUT", 0);
        r.quota = vec![QuotaReading::default(); MAX_READINGS + 1];
        assert!(decide(NOW, 1, &on(5), &r).is_err());
    }

    #[test]
    fn backoff_doubles_from_30s_capped_at_5min() {
        let bounds = [(15, 30), (30, 60), (60, 120), (120, 240), (150, 300), (150, 300)];
        for (done, (lo, hi)) in bounds.iter().enumerate() {
            for entropy in [0u64, 7, u64::MAX] {
                let d = decide(NOW, entropy, &on(10), &run("TIMEOUT", done as u32)).unwrap();
                let delay = d.delay.unwrap();
                assert!((lo * SEC..=hi * SEC).contains(&delay), "{done}: {delay}");
                assert_eq!(d.run_auto_resumed.unwrap().reason, "auto");
            }
        }
    }

    #[test]
    fn budget_needs_a_raised_cap() {
        let mut r = run("BUDGET_EXCEEDED", 0);
        r.budget_cap = Some("max-duration".into());
        r.budget_tripped_at = Some(7200);
        let d = decide(NOW, 1, &on(5), &r).unwrap();
        assert_eq!(d.action, Action::Terminal);
        assert!(d.reasoning.contains("raise max-duration above 7200"), "{}", d.reasoning);
        r.budget_in_effect = Some(7200);
        assert_eq!(decide(NOW, 1, &on(5), &r).unwrap().action, Action::Terminal);
        r.budget_in_effect = Some(14400);
        let d = decide(NOW, 1, &on(5), &r).unwrap();
        assert_eq!(d.action, Action::Resume);
        assert!(d.reasoning.contains("raised from 7200 to 14400"), "{}", d.reasoning);
    }

    #[test]
    fn a_full_window_that_resets_before_the_resume_does_not_block() {
        // A usage limit with a known reset in one hour; the 5h window is full
        // now and resets then; the 7d window is under the cap.
        let reset_ms = NOW + 3_600_000;
        let mut r = run("USAGE_LIMIT_REACHED", 0);
        r.evidence = Some(Evidence::from_text(format!("Claude AI usage limit reached|{}", reset_ms / 1000)));
        let full = |resets_at| QuotaReading { window: "5h".into(), percent: Some(100.0), resets_at };
        r.quota =
            vec![full(Some(reset_ms)), QuotaReading { window: "7d".into(), percent: Some(40.0), resets_at: None }];
        let d = decide(NOW, 1, &on(3), &r).unwrap();
        assert_eq!(d.action, Action::Resume, "{}", d.reasoning);
        assert!(d.resume_at.unwrap() >= reset_ms);
        assert!(d.reasoning.contains("5h resets at"), "{}", d.reasoning);
        // Without the reset instant, or with one after the resume, it blocks.
        r.quota[0] = full(None);
        assert_eq!(decide(NOW, 1, &on(3), &r).unwrap().action, Action::Terminal);
        r.quota[0] = full(Some(reset_ms + 86_400_000));
        assert_eq!(decide(NOW, 1, &on(3), &r).unwrap().action, Action::Terminal);
    }

    #[test]
    fn quota_cap_blocks_at_85_not_84_and_unknown_never() {
        let mut r = run("RATE_LIMITED", 0);
        r.quota = vec![
            QuotaReading { window: "5h".into(), percent: Some(84.0), resets_at: None },
            QuotaReading { window: "7d".into(), percent: None, resets_at: None },
        ];
        let d = decide(NOW, 1, &on(5), &r).unwrap();
        assert_eq!(d.action, Action::Resume);
        assert!(d.reasoning.contains("unknown reading never blocks"), "{}", d.reasoning);
        r.quota[0].percent = Some(85.0);
        let d = decide(NOW, 1, &on(5), &r).unwrap();
        assert_eq!(d.action, Action::Terminal);
        assert!(
            d.reasoning.contains("quota cap 85% reached (5h=85%") && d.reasoning.contains("resume it later"),
            "{}",
            d.reasoning
        );
        r.quota[0].percent = None;
        assert_eq!(decide(NOW, 1, &on(5), &r).unwrap().action, Action::Resume);
    }

    #[test]
    fn usage_limit_with_epoch_resumes_at_reset_plus_margin() {
        let r = text("USAGE_LIMIT_REACHED", 0, "Claude AI usage limit reached|1790007200");
        let d = decide(NOW, 1, &on(3), &r).unwrap();
        assert_eq!(d.action, Action::Resume);
        assert_eq!(d.resume_at, Some(1_790_007_200_000 + 60_000));
        assert_eq!(d.delay, Some(7200 * SEC + 60 * SEC));
        assert_eq!(d.run_auto_resumed.unwrap().reason, "usage-limit-reset");
    }

    #[test]
    fn usage_limit_without_offset_is_quoted_never_an_instant() {
        let r = text("USAGE_LIMIT_REACHED", 0, "Claude usage limit reached. Your limit will reset at 1pm (Etc/GMT+5).");
        let d = decide(NOW, 1, &on(3), &r).unwrap();
        assert_eq!(d.action, Action::Resume);
        assert_eq!(d.reset_hint.as_deref(), Some("reset at 1pm (Etc/GMT+5)."));
        let delay = d.delay.unwrap();
        assert!((150 * SEC..=300 * SEC).contains(&delay), "{delay}");
        assert_eq!(d.run_auto_resumed.unwrap().reason, "usage-limit-unknown-reset");
        assert!(d.reasoning.contains("no unambiguous instant"), "{}", d.reasoning);
    }

    #[test]
    fn usage_limit_too_far_away_stops() {
        let mut c = on(3);
        c.resume.max_reset_wait = 3600 * SEC;
        let r = text("USAGE_LIMIT_BLOCKED", 0, "Claude AI usage limit reached|1790007200");
        let d = decide(NOW, 1, &c, &r).unwrap();
        assert_eq!(d.action, Action::Terminal);
        assert!(d.reasoning.contains("max_reset_wait"), "{}", d.reasoning);
    }

    #[test]
    fn rate_limited_code_with_usage_limit_evidence_waits_for_the_reset() {
        let r = text("RATE_LIMITED", 0, "Claude AI usage limit reached|1790003600");
        let d = decide(NOW, 1, &on(3), &r).unwrap();
        assert_eq!(d.run_auto_resumed.as_ref().unwrap().reason, "usage-limit-reset");
        assert_eq!(d.run_auto_resumed.unwrap().code, "RATE_LIMITED");
    }

    #[test]
    fn environmental_evidence_vetoes_an_allow_listed_code() {
        let mut r = run("RATE_LIMITED", 0);
        r.evidence = Some(Evidence {
            http_status: Some(429),
            error_code: Some("insufficient_quota".into()),
            ..Default::default()
        });
        let d = decide(NOW, 1, &on(3), &r).unwrap();
        assert_eq!(d.action, Action::Terminal);
        assert!(d.reasoning.contains("environmental"), "{}", d.reasoning);
    }

    #[test]
    fn execution_failed_needs_transient_evidence() {
        assert_eq!(decide(NOW, 1, &on(3), &run("EXECUTION_FAILED", 0)).unwrap().action, Action::Terminal);
        let d = decide(NOW, 1, &on(3), &text("EXECUTION_FAILED", 0, "node produced an invalid verdict")).unwrap();
        assert_eq!(d.action, Action::Terminal);
        let d = decide(
            NOW,
            1,
            &on(3),
            &text("EXECUTION_FAILED", 0, "claude session idle for 4m0s (thinking phase) — aborting"),
        )
        .unwrap();
        assert_eq!(d.action, Action::Resume);
    }

    #[test]
    fn server_retry_after_is_a_floor_at_run_level() {
        let mut r = run("RATE_LIMITED", 0);
        r.evidence = Some(Evidence {
            headers: vec![Header { name: "Retry-After".into(), value: "600".into() }],
            ..Default::default()
        });
        let d = decide(NOW, 1, &on(3), &r).unwrap();
        assert_eq!(d.delay, Some(600 * SEC));
        assert_eq!(d.server_hint.as_deref(), Some("Retry-After: 600"));
        assert_eq!(d.run_auto_resumed.unwrap().reason, "server-hint");
        r.evidence.as_mut().unwrap().headers[0].value = "1".into();
        let d = decide(NOW, 1, &on(3), &r).unwrap();
        assert!(d.delay.unwrap() >= 15 * SEC);
        assert_eq!(d.server_hint, None);
    }

    #[test]
    fn unified_reset_header_schedules_a_usage_limit() {
        let mut r = run("USAGE_LIMIT_REACHED", 0);
        r.evidence = Some(Evidence {
            headers: vec![Header { name: "anthropic-ratelimit-unified-reset".into(), value: "1790001800".into() }],
            ..Default::default()
        });
        let d = decide(NOW, 1, &on(3), &r).unwrap();
        assert_eq!(d.resume_at, Some(1_790_001_800_000 + 60_000));
        assert_eq!(d.server_hint.as_deref(), Some("anthropic-ratelimit-unified-reset: 1790001800"));
    }
}
