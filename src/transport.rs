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
    let steps = if c.completed_steps.is_empty() {
        "none".to_string()
    } else {
        c.completed_steps.join(", ")
    };
    let plural = if attempts == 1 { "" } else { "s" };
    format!(
        "{}; {attempts} attempt{plural} made, {} waited on backoff; completed steps: {steps}",
        c.reasoning,
        human(waited)
    )
}

pub fn decide(now: Timestamp, entropy: u64, config: &Config, s: &StepFailure) -> Result<Decision, PolicyError> {
    let _ = now;
    if s.attempt == 0 {
        return Err(PolicyError::input("situation.step_failed.attempt", "at least 1 (the 1-based attempt that just failed)"));
    }
    if s.attempt > MAX_ATTEMPT {
        return Err(PolicyError::input("situation.step_failed.attempt", format!("at most {MAX_ATTEMPT}")));
    }
    let t = &config.transport;
    let c = classify_with(&s.evidence, &Options::from_config(config));
    let mut d = match c.class {
        FailureClass::TransientTransport => transient(t, entropy, s, &c),
        _ => {
            let why = format!("stopped: {}", stop_summary(&c, s.attempt, s.waited));
            from_classification(Action::Terminal, &c, why)
        }
    };
    d.attempt = s.attempt;
    d.max_attempts = t.max_attempts;
    d.waited = s.waited;
    Ok(d)
}

fn transient(t: &TransportConfig, entropy: u64, s: &StepFailure, c: &Classification) -> Decision {
    if s.attempt >= t.max_attempts {
        let why = format!(
            "stopped: transient-retry attempt cap reached ({} attempts): {}",
            t.max_attempts,
            stop_summary(c, s.attempt, s.waited)
        );
        return from_classification(Action::TerminalBudgetExhausted, c, why);
    }
    if s.waited >= t.budget {
        let why = format!(
            "stopped: transient-retry backoff-wait budget exhausted ({}): {}",
            human(t.budget),
            stop_summary(c, s.attempt, s.waited)
        );
        return from_classification(Action::TerminalBudgetExhausted, c, why);
    }
    let left = t.budget - s.waited;
    let planned = backoff::delay(t.initial_delay, t.multiplier, s.attempt - 1, u64::MAX, entropy);
    let delay = planned.min(left);
    let clamp = if delay < planned { format!(", clamped to the {} left of the budget", human(left)) } else { String::new() };
    let why = format!(
        "{}; retry {} of {} after {}{clamp}",
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
        assert!(d.reasoning.contains("work") && d.reasoning.contains("prep") && d.reasoning.contains("1 attempt made"), "{}", d.reasoning);
    }

    #[test]
    fn attempt_zero_is_rejected() {
        let e = decide(0, 1, &Config::default(), &step("x", 0, 0)).unwrap_err();
        assert!(matches!(e, PolicyError::InvalidInput(f) if f.field == "situation.step_failed.attempt"));
    }
}
