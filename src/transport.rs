//! The bounded transport retry of one step (the in-executor layer).
//!
//! Only a retryable `transient-transport` classification is retried, with
//! exponential backoff and equal jitter, bounded by an attempt cap and by a
//! budget on the time spent *waiting* on backoff — never the age of the run:
//! the fault this exists for arrives hours into a long run. An optional total
//! deadline (`max-elapsed`) counts the time spent in calls too.
//!
//! The class, the signal and the server's hints are the classification's;
//! this module resolves a hint's instant against `now` and never rewrites
//! what `classify` said.

use crate::backoff;
use crate::classify::classify_configured;
use crate::decision::{build, later, Facts};
use crate::hints::{ignored_note, quotes, server_wait};
use crate::model::*;
use crate::text::{count, format_utc, human};

/// At most this attempt number is accepted.
pub const MAX_ATTEMPT: u32 = 1000;

/// What one branch decided: everything of the decision that differs by branch.
struct Outcome {
    action: Action,
    why: String,
    delay: Option<Duration>,
    resume_at: Option<Timestamp>,
    server_hint: Option<String>,
}

impl Outcome {
    fn stop(action: Action, why: String, server_hint: Option<String>) -> Outcome {
        Outcome { action, why, delay: None, resume_at: None, server_hint }
    }
}

/// What a stop says: class and signal, attempts, time waited, completed steps.
pub fn stop_summary(c: &Classification, attempts: u32, waited: Duration) -> String {
    let steps = if c.completed_steps.is_empty() { "none".to_string() } else { c.completed_steps.join(", ") };
    format!(
        "{}; {} made, {} waited on backoff; completed steps: {steps}",
        c.reasoning,
        count(attempts as u64, "attempt"),
        human(waited)
    )
}

fn validate(s: &StepFailure) -> Result<(), PolicyError> {
    if s.attempt == 0 {
        return Err(PolicyError::input(
            "situation.step_failed.attempt",
            "at least 1 (the 1-based attempt that just failed)",
        ));
    }
    if s.attempt > MAX_ATTEMPT {
        return Err(PolicyError::input("situation.step_failed.attempt", format!("at most {MAX_ATTEMPT}")));
    }
    Ok(())
}

/// The step retry decision, in order:
/// 1. a failure the server said not to retry (`x-should-retry: false`) stops;
/// 2. a usage limit is never retried here: its wait outlasts the budget; the
///    decision quotes the reset;
/// 3. a `transient-transport` failure is retried (see [`transient`]);
/// 4. anything else stops: a failing test or a rejected credential gives the
///    same answer again, whatever a header says.
pub fn decide(now: Timestamp, entropy: u64, config: &Config, s: &StepFailure) -> Result<Decision, PolicyError> {
    validate(s)?;
    let t = &config.transport;
    let c = classify_configured(&s.evidence, config);
    let o = if c.hint(HintKind::ShouldNotRetry).is_some() {
        let why = format!("stopped: {}{}", stop_summary(&c, s.attempt, s.waited), ignored_note(&c));
        Outcome::stop(Action::Terminal, why, quotes(&c, &[HintKind::ShouldNotRetry]))
    } else if c.class == FailureClass::UsageLimit {
        usage_limit(now, &c, s)
    } else if c.class == FailureClass::TransientTransport {
        transient(now, t, entropy, s, &c)
    } else {
        let overruled = match c.hint(HintKind::ShouldRetry) {
            Some(h) => format!(
                "; `{}` does not make a `{}` failure retryable: it gives the same answer again",
                h.header,
                c.class.as_str()
            ),
            None => String::new(),
        };
        let why = format!("stopped: {}{overruled}{}", stop_summary(&c, s.attempt, s.waited), ignored_note(&c));
        Outcome::stop(Action::Terminal, why, None)
    };
    let facts = Facts {
        classification: Some(&c),
        delay: o.delay,
        resume_at: o.resume_at,
        attempt: s.attempt,
        max_attempts: t.max_attempts,
        retryable: c.retryable,
        waited: s.waited,
        server_hint: o.server_hint,
        ..Facts::default()
    };
    Ok(build(o.action, o.why, facts))
}

/// A usage limit: never retried inside the transport budget.
fn usage_limit(now: Timestamp, c: &Classification, s: &StepFailure) -> Outcome {
    let header = c.hint(HintKind::UsageLimitReset);
    let reset = match (header, c.reset_at, c.reset_after, c.reset_hint.as_deref()) {
        (Some(h), Some(at), _, _) => format!("; the server gives the reset as {} (`{}`)", format_utc(at), h.header),
        (None, Some(at), _, _) => format!("; the reset instant is {}", format_utc(at)),
        (_, None, Some(after), _) => {
            format!("; the reset is {} from the failure (about {})", human(after), format_utc(later(now, after)))
        }
        (_, None, None, Some(q)) => format!(
            "; the hint names no unambiguous instant (it has no {}), so none is computed from it",
            crate::reset::lacks(q)
        ),
        _ => String::new(),
    };
    let why = format!(
        "stopped: {}{reset}; not retried inside the transport budget: wait for the reset, then resume the run (with auto-resume on, the run-level layer schedules it); {} made, {} waited on backoff{}",
        c.reasoning,
        count(s.attempt as u64, "attempt"),
        human(s.waited),
        ignored_note(c)
    );
    Outcome::stop(Action::Terminal, why, quotes(c, &[HintKind::UsageLimitRejected, HintKind::UsageLimitReset]))
}

/// A transient failure. A server wait longer than `hint-ceiling` hands over
/// to `resume`; then the attempt cap, the backoff-wait budget and the total
/// deadline stop; else a retry after the server's wait (in place of the
/// backoff) or the backoff, clamped to what is left of the budget and the
/// deadline. A wait of zero (`retry-after: 0`, a date already past) is no
/// usable hint: the backoff applies, and the hint is still quoted.
/// Why the step's retries are spent: the attempt cap, the backoff-wait
/// budget, or the total deadline; none while they last.
fn spent(t: &TransportConfig, s: &StepFailure, c: &Classification) -> Option<String> {
    let summary = stop_summary(c, s.attempt, s.waited);
    if s.attempt >= t.max_attempts {
        let cap = count(t.max_attempts as u64, "attempt");
        return Some(format!("stopped: transient-retry attempt cap reached ({cap}): {summary}"));
    }
    if s.waited >= t.budget {
        return Some(format!(
            "stopped: transient-retry backoff-wait budget exhausted ({}): {summary}",
            human(t.budget)
        ));
    }
    if t.max_elapsed > 0 && s.elapsed >= t.max_elapsed {
        return Some(format!(
            "stopped: transient-retry total deadline reached (config.transport.max_elapsed {}, {} elapsed since the first attempt): {summary}",
            human(t.max_elapsed),
            human(s.elapsed)
        ));
    }
    None
}

fn transient(now: Timestamp, t: &TransportConfig, entropy: u64, s: &StepFailure, c: &Classification) -> Outcome {
    let ignored = ignored_note(c);
    let decided =
        quotes(c, &[HintKind::ShouldRetry, HintKind::RateLimitReset]).filter(|_| c.source == SignalSource::Header);
    let wait = server_wait(c, now);
    // The hints that decided the class, and the one that set the wait, each once.
    let hint_quote = |h: &ServerHint| match decided.as_deref() {
        Some(d) if d.split("; ").any(|q| h.header.contains(q)) => Some(d.to_string()),
        Some(d) => Some(format!("{d}; {}", h.header)),
        None => Some(h.header.clone()),
    };
    if let Some((w, h)) = wait.filter(|(w, _)| *w > t.hint_ceiling) {
        let why = format!(
            "{}; the server asks to wait {} (`{}`), longer than transport.hint_ceiling ({}): not slept inside the transport budget — stop the step resumably and resume the run at {} (the run-level layer applies max_resumes, the quota cap and max_reset_wait){ignored}",
            c.reasoning,
            human(w),
            h.header,
            human(t.hint_ceiling),
            format_utc(later(now, w))
        );
        return Outcome {
            action: Action::Resume,
            why,
            delay: Some(w),
            resume_at: Some(later(now, w)),
            server_hint: hint_quote(h),
        };
    }
    if let Some(why) = spent(t, s, c) {
        return Outcome::stop(Action::TerminalBudgetExhausted, format!("{why}{ignored}"), decided);
    }
    let deadline = (t.max_elapsed > 0).then(|| t.max_elapsed.saturating_sub(s.elapsed));
    let backoff = || backoff::delay(t.initial_delay, t.multiplier, s.attempt - 1, u64::MAX, entropy);
    let (planned, source, server_hint) = match wait {
        Some((w, h)) if w > 0 => (w, format!(" (server hint `{}`, in place of the backoff)", h.header), hint_quote(h)),
        Some((_, h)) => (
            backoff(),
            format!(" (the server hint `{}` asks for no wait: the backoff applies, as an immediate retry of a fleet stampedes)", h.header),
            hint_quote(h),
        ),
        None => (backoff(), String::new(), decided),
    };
    let left = t.budget - s.waited;
    let limit = deadline.map_or(left, |d| d.min(left));
    let delay = planned.min(limit);
    let clamp = match (delay < planned, deadline) {
        (false, _) => String::new(),
        (true, Some(d)) if d < left => format!(", clamped to the {} left of the total deadline", human(d)),
        (true, _) => format!(", clamped to the {} left of the budget", human(left)),
    };
    let why = format!(
        "{}; retry {} of {} after {}{source}{clamp}{ignored}",
        c.reasoning,
        s.attempt,
        t.max_attempts - 1,
        human(delay)
    );
    Outcome { action: Action::Retry, why, delay: Some(delay), resume_at: None, server_hint }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(text: &str, attempt: u32, waited: Duration) -> StepFailure {
        StepFailure { evidence: Evidence::from_text(text), attempt, waited, elapsed: 0 }
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
        let d =
            decide(0, 1, &Config::default(), &StepFailure { evidence: e, attempt: 1, waited: 0, elapsed: 0 }).unwrap();
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
