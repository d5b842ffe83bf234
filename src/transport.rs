//! The bounded transport retry of one step (the in-executor layer).
//!
//! Only `transient-transport` is retried, with exponential backoff and equal
//! jitter, bounded by an attempt cap and by a budget on the time spent
//! *waiting* on backoff — never the age of the run: the fault this exists for
//! arrives hours into a long run.

use crate::backoff;
use crate::classify::{classify_with, Options};
use crate::config::human;
use crate::model::*;
use crate::{hints, reset};

/// At most this attempt number is accepted.
pub const MAX_ATTEMPT: u32 = 1000;

/// A decision with every optional part empty.
pub fn blank(action: Action, reasoning: String) -> Decision {
    Decision {
        schema_version: crate::record::SCHEMA_VERSION,
        action,
        delay: None,
        resume_at: None,
        class: None,
        signal: None,
        reasoning,
        attempt: 0,
        max_attempts: 0,
        retryable: false,
        waited: 0,
        failed_steps: Vec::new(),
        completed_steps: Vec::new(),
        evidence: String::new(),
        reset_hint: None,
        server_hint: None,
        circuit_breaker: None,
        run_auto_resumed: None,
        record_json: String::new(),
    }
}

/// A decision carrying a classification's facts.
pub fn from_classification(action: Action, c: &Classification, reasoning: String) -> Decision {
    Decision {
        class: Some(c.class),
        signal: c.signal.clone(),
        retryable: c.retryable,
        failed_steps: c.failed_steps.clone(),
        completed_steps: c.completed_steps.clone(),
        evidence: c.evidence.clone(),
        reset_hint: c.reset_hint.clone(),
        ..blank(action, reasoning)
    }
}

/// What a stop says: class and signal, attempts, time waited, completed steps.
pub fn stop_summary(c: &Classification, attempts: u32, waited: Duration) -> String {
    let steps = if c.completed_steps.is_empty() { "none".to_string() } else { c.completed_steps.join(", ") };
    let plural = if attempts == 1 { "" } else { "s" };
    format!(
        "{}; {attempts} attempt{plural} made, {} waited on backoff; completed steps: {steps}",
        c.reasoning,
        human(waited)
    )
}

/// `ms` later than `now` by `delay` nanoseconds, rounded up to the millisecond
/// (never early), saturating.
pub fn later(now: Timestamp, delay: Duration) -> Timestamp {
    now.saturating_add(delay.div_ceil(NANOS_PER_MILLI))
}

/// The step retry decision.
///
/// Order: the attempt number is checked; server hints are read from
/// `evidence.headers` (see `hints`); then
/// 1. `x-should-retry: false` stops, whatever the class;
/// 2. a usage limit (the class, or `anthropic-ratelimit-unified-status:
///    rejected` on a transient or unidentified failure) is never retried
///    here: its wait outlasts the budget; the decision quotes the reset;
/// 3. only `transient-transport` is retried, and what `x-should-retry: true`
///    upgrades: `indeterminate` and `usage-limit` (the server is the authority on
///    its own request). Never `work` or `environmental`: a failing test or a
///    rejected credential (401/403) gives the same answer again, whatever a
///    header says;
/// 4. a retry waits the server's `retry-after-ms` / `retry-after` when given
///    (replacing the backoff, clamped to what is left of the budget); a hint
///    longer than `hint-ceiling` gives `resume` with that delay instead: the
///    wait is handed to the run level, not slept inside the budget.
pub fn decide(now: Timestamp, entropy: u64, config: &Config, s: &StepFailure) -> Result<Decision, PolicyError> {
    if s.attempt == 0 {
        return Err(PolicyError::input(
            "situation.step_failed.attempt",
            "at least 1 (the 1-based attempt that just failed)",
        ));
    }
    if s.attempt > MAX_ATTEMPT {
        return Err(PolicyError::input("situation.step_failed.attempt", format!("at most {MAX_ATTEMPT}")));
    }
    let t = &config.transport;
    let mut c = classify_with(&s.evidence, &Options::from_config(config));
    let h = hints::read(&s.evidence.headers, now);
    let ignored = h.ignored_note();
    let mut server_hint: Option<String> = None;
    let server_says_retry = matches!(h.should_retry, Some((true, _)));
    let allowed_by_server =
        server_says_retry && matches!(c.class, FailureClass::Indeterminate | FailureClass::UsageLimit);

    let mut d = if let Some((false, hint)) = &h.should_retry {
        let why =
            format!("stopped: the server said `{hint}`: no retry; {}{ignored}", stop_summary(&c, s.attempt, s.waited));
        server_hint = Some(hint.clone());
        from_classification(Action::Terminal, &c, why)
    } else if !allowed_by_server
        && (c.class == FailureClass::UsageLimit
            || (h.unified_rejected.is_some()
                && !server_says_retry
                && matches!(c.class, FailureClass::TransientTransport | FailureClass::Indeterminate)))
    {
        if c.class != FailureClass::UsageLimit {
            let hint = h.unified_rejected.clone().unwrap_or_default();
            c.class = FailureClass::UsageLimit;
            c.retryable = false;
            c.signal = Some(format!("header {hint}"));
            c.reasoning =
                crate::classify::reasoning(FailureClass::UsageLimit, c.signal.as_deref(), c.reset_hint.as_deref());
            server_hint = Some(hint);
        }
        usage_limit(now, &c, &h, s, &mut server_hint, &ignored)
    } else if c.class == FailureClass::TransientTransport || allowed_by_server {
        if allowed_by_server {
            server_hint = h.should_retry.as_ref().map(|(_, q)| q.clone());
        }
        transient(now, t, entropy, s, &c, &h, &mut server_hint)
    } else {
        let overruled = match &h.should_retry {
            Some((true, q)) => format!(
                "; `{q}` does not make a `{}` failure retryable: it gives the same answer again",
                c.class.as_str()
            ),
            _ => String::new(),
        };
        let why = format!("stopped: {}{overruled}{ignored}", stop_summary(&c, s.attempt, s.waited));
        from_classification(Action::Terminal, &c, why)
    };
    if allowed_by_server {
        d.retryable = true;
    }
    d.server_hint = server_hint;
    d.attempt = s.attempt;
    d.max_attempts = t.max_attempts;
    d.waited = s.waited;
    Ok(d)
}

/// A usage limit: never retried inside the transport budget.
fn usage_limit(
    now: Timestamp,
    c: &Classification,
    h: &hints::Hints,
    s: &StepFailure,
    server_hint: &mut Option<String>,
    ignored: &str,
) -> Decision {
    let reset = if let Some((at, q)) = &h.unified_reset {
        *server_hint = Some(match server_hint.take() {
            Some(prev) => format!("{prev}; {q}"),
            None => q.clone(),
        });
        format!("; the server gives the reset as {} (`{q}`)", reset::format_utc(*at))
    } else if let Some(at) = c.reset_at {
        format!("; the reset instant is {}", reset::format_utc(at))
    } else if let Some(after) = c.reset_after {
        format!("; the reset is {} from the failure (about {})", human(after), reset::format_utc(later(now, after)))
    } else if c.reset_hint.is_some() {
        "; the hint names no unambiguous instant (no UTC offset or epoch), so none is computed from it".to_string()
    } else {
        String::new()
    };
    let why = format!(
        "stopped: {}{reset}; not retried inside the transport budget: wait for the reset, then resume the run (with auto-resume on, the run-level layer schedules it); {} attempt{} made, {} waited on backoff{ignored}",
        c.reasoning,
        s.attempt,
        if s.attempt == 1 { "" } else { "s" },
        human(s.waited)
    );
    from_classification(Action::Terminal, c, why)
}

fn transient(
    now: Timestamp,
    t: &TransportConfig,
    entropy: u64,
    s: &StepFailure,
    c: &Classification,
    h: &hints::Hints,
    server_hint: &mut Option<String>,
) -> Decision {
    let ignored = h.ignored_note();
    let allowed = match server_hint.as_deref() {
        Some(q) => format!(" (retry allowed by the server: `{q}`)"),
        None => String::new(),
    };
    let note = |q: &str, prev: &mut Option<String>| {
        *prev = Some(match prev.take() {
            Some(p) => format!("{p}; {q}"),
            None => q.to_string(),
        });
    };
    if let Some(w) = &h.wait {
        if w.delay > t.hint_ceiling {
            note(&w.hint, server_hint);
            let why = format!(
                "{}{allowed}; the server asks to wait {} (`{}`), longer than transport.hint_ceiling ({}): not slept inside the transport budget — stop the step resumably and resume the run at {} (the run-level layer applies max_resumes, the quota cap and max_reset_wait){ignored}",
                c.reasoning,
                human(w.delay),
                w.hint,
                human(t.hint_ceiling),
                reset::format_utc(later(now, w.delay))
            );
            let mut d = from_classification(Action::Resume, c, why);
            d.delay = Some(w.delay);
            d.resume_at = Some(later(now, w.delay));
            return d;
        }
    }
    if s.attempt >= t.max_attempts {
        let why = format!(
            "stopped: transient-retry attempt cap reached ({} attempts){allowed}: {}{ignored}",
            t.max_attempts,
            stop_summary(c, s.attempt, s.waited)
        );
        return from_classification(Action::TerminalBudgetExhausted, c, why);
    }
    if s.waited >= t.budget {
        let why = format!(
            "stopped: transient-retry backoff-wait budget exhausted ({}){allowed}: {}{ignored}",
            human(t.budget),
            stop_summary(c, s.attempt, s.waited)
        );
        return from_classification(Action::TerminalBudgetExhausted, c, why);
    }
    let left = t.budget - s.waited;
    let (planned, source) = match &h.wait {
        Some(w) => {
            note(&w.hint, server_hint);
            (w.delay, format!(" (server hint `{}`, in place of the backoff)", w.hint))
        }
        None => (backoff::delay(t.initial_delay, t.multiplier, s.attempt - 1, u64::MAX, entropy), String::new()),
    };
    let delay = planned.min(left);
    let clamp =
        if delay < planned { format!(", clamped to the {} left of the budget", human(left)) } else { String::new() };
    let why = format!(
        "{}{allowed}; retry {} of {} after {}{source}{clamp}{ignored}",
        c.reasoning,
        s.attempt,
        t.max_attempts - 1,
        human(delay)
    );
    let mut d = from_classification(Action::Retry, c, why);
    d.delay = Some(delay);
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(text: &str, attempt: u32, waited: Duration) -> StepFailure {
        StepFailure { evidence: Evidence::from_text(text), attempt, waited }
    }

    #[test]
    fn first_529_retries_within_jitter_bounds() {
        let c = Config::default();
        for entropy in [0u64, 1, 99, u64::MAX] {
            let d = decide(0, entropy, &c, &step("API Error: 529", 1, 0)).unwrap();
            assert_eq!(d.action, Action::Retry);
            let delay = d.delay.unwrap();
            assert!((5 * NANOS_PER_SEC..=10 * NANOS_PER_SEC).contains(&delay), "{delay}");
        }
    }

    #[test]
    fn attempt_cap_stops() {
        let d = decide(0, 7, &Config::default(), &step("API Error: 529", 3, 15 * NANOS_PER_SEC)).unwrap();
        assert_eq!(d.action, Action::TerminalBudgetExhausted);
        assert!(d.reasoning.contains("attempt cap"), "{}", d.reasoning);
    }

    #[test]
    fn budget_counts_waits_only_and_clamps_last_delay() {
        let mut c = Config::default();
        c.transport.max_attempts = 10;
        c.transport.budget = 30 * NANOS_PER_SEC;
        let d = decide(0, u64::MAX, &c, &step("socket hang up", 3, 25 * NANOS_PER_SEC)).unwrap();
        assert_eq!(d.action, Action::Retry);
        assert_eq!(d.delay, Some(5 * NANOS_PER_SEC));
        let d = decide(0, 1, &c, &step("socket hang up", 4, 30 * NANOS_PER_SEC)).unwrap();
        assert_eq!(d.action, Action::TerminalBudgetExhausted);
        assert!(d.reasoning.contains("budget"), "{}", d.reasoning);
    }

    #[test]
    fn one_attempt_disables_retry() {
        let mut c = Config::default();
        c.transport.max_attempts = 1;
        let d = decide(0, 1, &c, &step("API Error: 529", 1, 0)).unwrap();
        assert_eq!(d.action, Action::TerminalBudgetExhausted);
    }

    #[test]
    fn work_is_terminal_and_names_completed_steps() {
        let mut e = Evidence::from_text("test result: FAILED. 1 failed");
        e.steps.push(StepReport { id: "prep".into(), status: "success".into(), ..Default::default() });
        let d = decide(0, 1, &Config::default(), &StepFailure { evidence: e, attempt: 1, waited: 0 }).unwrap();
        assert_eq!(d.action, Action::Terminal);
        assert!(
            d.reasoning.contains("work") && d.reasoning.contains("prep") && d.reasoning.contains("1 attempt made"),
            "{}",
            d.reasoning
        );
    }

    #[test]
    fn attempt_zero_is_rejected() {
        let e = decide(0, 1, &Config::default(), &step("x", 0, 0)).unwrap_err();
        assert!(matches!(e, PolicyError::InvalidInput(f) if f.field == "situation.step_failed.attempt"));
    }

    fn with_headers(text: &str, attempt: u32, waited: Duration, headers: &[(&str, &str)]) -> StepFailure {
        let mut s = step(text, attempt, waited);
        s.evidence.headers =
            headers.iter().map(|(n, v)| Header { name: n.to_string(), value: v.to_string() }).collect();
        s
    }

    const NOW: Timestamp = 1_790_000_000_000;

    #[test]
    fn retry_after_replaces_backoff_and_is_clamped_to_budget() {
        let c = Config::default();
        let d = decide(NOW, 1, &c, &with_headers("API Error: 529", 1, 0, &[("Retry-After", "7")])).unwrap();
        assert_eq!(d.action, Action::Retry);
        assert_eq!(d.delay, Some(7 * NANOS_PER_SEC));
        assert_eq!(d.server_hint.as_deref(), Some("Retry-After: 7"));
        let d = decide(NOW, 1, &c, &with_headers("API Error: 529", 2, 296 * NANOS_PER_SEC, &[("retry-after", "7")]))
            .unwrap();
        assert_eq!(d.delay, Some(4 * NANOS_PER_SEC));
        assert!(d.reasoning.contains("clamped"), "{}", d.reasoning);
    }

    #[test]
    fn long_hint_hands_the_wait_to_resume() {
        let d = decide(NOW, 1, &Config::default(), &with_headers("API Error: 529", 1, 0, &[("retry-after", "7200")]))
            .unwrap();
        assert_eq!(d.action, Action::Resume);
        assert_eq!(d.delay, Some(7200 * NANOS_PER_SEC));
        assert_eq!(d.resume_at, Some(NOW + 7_200_000));
        assert!(d.reasoning.contains("hint_ceiling"), "{}", d.reasoning);
        // Even past the attempt cap: the wait is not slept here.
        let d = decide(NOW, 1, &Config::default(), &with_headers("API Error: 529", 3, 0, &[("retry-after", "7200")]))
            .unwrap();
        assert_eq!(d.action, Action::Resume);
    }

    #[test]
    fn should_retry_false_stops_a_transient_failure() {
        let d = decide(
            NOW,
            1,
            &Config::default(),
            &with_headers("API Error: 529", 1, 0, &[("x-should-retry", "false"), ("retry-after", "1")]),
        )
        .unwrap();
        assert_eq!(d.action, Action::Terminal);
        assert_eq!(d.server_hint.as_deref(), Some("x-should-retry: false"));
    }

    #[test]
    fn should_retry_true_upgrades_unidentified_and_usage_but_not_work_or_auth() {
        let c = Config::default();
        let d =
            decide(NOW, 1, &c, &with_headers("something odd happened", 1, 0, &[("x-should-retry", "true")])).unwrap();
        assert_eq!(d.action, Action::Retry);
        assert!(d.retryable);
        assert_eq!(d.server_hint.as_deref(), Some("x-should-retry: true"));
        let text = "API Error: Server is temporarily limiting requests (not your usage limit) · Rate limited";
        let d = decide(NOW, 1, &c, &with_headers(text, 1, 0, &[("x-should-retry", "true")])).unwrap();
        assert_eq!(d.action, Action::Retry, "{}", d.reasoning);
        let d = decide(NOW, 1, &c, &with_headers(text, 1, 0, &[])).unwrap();
        assert_eq!(d.action, Action::Retry, "server-side limiting is transient without the header too");
        let d = decide(NOW, 1, &c, &with_headers("You've hit your session limit", 1, 0, &[("x-should-retry", "true")]))
            .unwrap();
        assert_eq!(d.action, Action::Retry, "{}", d.reasoning);
        let mut s = with_headers("unauthorized", 1, 0, &[("x-should-retry", "true")]);
        s.evidence.http_status = Some(401);
        let d = decide(NOW, 1, &c, &s).unwrap();
        assert_eq!(d.action, Action::Terminal);
        assert!(d.reasoning.contains("does not make"), "{}", d.reasoning);
        let d = decide(NOW, 1, &c, &with_headers("test result: FAILED. 1 failed", 1, 0, &[("x-should-retry", "true")]))
            .unwrap();
        assert_eq!(d.action, Action::Terminal);
    }

    #[test]
    fn usage_limit_is_never_retried_and_quotes_the_reset() {
        let mut c = Config::default();
        c.transport.max_attempts = 10;
        let d = decide(NOW, 1, &c, &step("You've hit your session limit · resets 12:50am (America/Los_Angeles)", 1, 0))
            .unwrap();
        assert_eq!(d.action, Action::Terminal);
        assert_eq!(d.class, Some(FailureClass::UsageLimit));
        assert_eq!(d.reset_hint.as_deref(), Some("resets 12:50am (America/Los_Angeles)"));
        assert_eq!(d.resume_at, None);
        assert!(d.reasoning.contains("no unambiguous instant") && d.reasoning.contains("resume"), "{}", d.reasoning);
    }

    #[test]
    fn unified_status_rejected_makes_a_429_a_usage_limit() {
        let mut s = with_headers(
            "rate limit exceeded",
            1,
            0,
            &[("anthropic-ratelimit-unified-status", "rejected"), ("anthropic-ratelimit-unified-reset", "1790007200")],
        );
        s.evidence.http_status = Some(429);
        let d = decide(NOW, 1, &Config::default(), &s).unwrap();
        assert_eq!(d.action, Action::Terminal);
        assert_eq!(d.class, Some(FailureClass::UsageLimit));
        assert!(d.reasoning.contains("2026-09-21T16:13:20Z"), "{}", d.reasoning);
        assert!(d.server_hint.unwrap().contains("anthropic-ratelimit-unified-reset: 1790007200"));
    }

    #[test]
    fn unparseable_hint_is_ignored_and_said() {
        let d = decide(NOW, 1, &Config::default(), &with_headers("API Error: 529", 1, 0, &[("retry-after", "soon")]))
            .unwrap();
        assert_eq!(d.action, Action::Retry);
        assert!((5 * NANOS_PER_SEC..=10 * NANOS_PER_SEC).contains(&d.delay.unwrap()));
        assert_eq!(d.server_hint, None);
        assert!(d.reasoning.contains("ignored server hint `retry-after: soon`"), "{}", d.reasoning);
    }
}
