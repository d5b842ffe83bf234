//! The one builder of decisions: every decider gathers its facts first and
//! calls [`build`] once; nothing patches a decision afterwards. The record's
//! JSON (`record_json`) is written here too, from the finished fields.

use crate::model::*;
use crate::record::SCHEMA_VERSION;

/// Everything a decision says besides its action and reasoning. Written with
/// struct-update syntax from `Facts::default()`, so an unnamed fact is empty.
#[derive(Debug, Default)]
pub struct Facts<'a> {
    /// The classification acted on: class, signal, failed and completed
    /// steps, the evidence echo and the reset hint are copied from it.
    pub classification: Option<&'a Classification>,
    /// The class when there is no classification (a breaker counts work failures).
    pub class: Option<FailureClass>,
    pub delay: Option<Duration>,
    pub resume_at: Option<Timestamp>,
    pub attempt: u32,
    pub max_attempts: u32,
    /// Whether the failure is mechanically retryable (a transient fault, or an
    /// allow-listed run-stop code).
    pub retryable: bool,
    pub waited: Duration,
    /// The server hints that decided, as received.
    pub server_hint: Option<String>,
    /// A reset hint when the classification gives none.
    pub reset_hint: Option<String>,
    pub circuit_breaker: Option<CircuitBreaker>,
    pub run_auto_resumed: Option<RunAutoResumed>,
}

/// The decision, whole, with its record.
pub fn build(action: Action, reasoning: String, f: Facts) -> Decision {
    let c = f.classification;
    let mut d = Decision {
        schema_version: SCHEMA_VERSION,
        action,
        delay: f.delay,
        resume_at: f.resume_at,
        class: c.map(|c| c.class).or(f.class),
        signal: c.and_then(|c| c.signal.clone()),
        reasoning,
        attempt: f.attempt,
        max_attempts: f.max_attempts,
        retryable: f.retryable,
        waited: f.waited,
        failed_steps: c.map(|c| c.failed_steps.clone()).unwrap_or_default(),
        completed_steps: c.map(|c| c.completed_steps.clone()).unwrap_or_default(),
        evidence: c.map(|c| c.evidence.clone()).unwrap_or_default(),
        reset_hint: c.and_then(|c| c.reset_hint.clone()).or(f.reset_hint),
        server_hint: f.server_hint,
        circuit_breaker: f.circuit_breaker,
        run_auto_resumed: f.run_auto_resumed,
        record_json: String::new(),
    };
    d.record_json = serde_json::to_string(&d).unwrap_or_else(|_| "{}".to_string());
    d
}

/// `ms` later than `now` by `delay` nanoseconds, rounded up to the millisecond
/// (never early), saturating.
pub fn later(now: Timestamp, delay: Duration) -> Timestamp {
    now.saturating_add(delay.div_ceil(NANOS_PER_MILLI))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_holds_every_field_but_itself() {
        let d = build(Action::Proceed, "why".into(), Facts { attempt: 2, max_attempts: 3, ..Facts::default() });
        let v: serde_json::Value = serde_json::from_str(&d.record_json).unwrap();
        assert_eq!(v["attempt"], 2);
        assert_eq!(v["reasoning"], "why");
        assert!(v.get("record_json").is_none());
    }

    #[test]
    fn later_rounds_up_and_saturates() {
        assert_eq!(later(1_000, 1), 1_001);
        assert_eq!(later(1_000, NANOS_PER_MILLI), 1_001);
        assert_eq!(later(u64::MAX - 1, u64::MAX), u64::MAX);
    }
}
