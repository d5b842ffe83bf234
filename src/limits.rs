//! Count limits that block a loop: the windowed task-failure limit with its
//! re-enqueue backoff, and the cycle limit for a state cycle that re-enters
//! itself. Both block with a `circuit_breaker` record naming the unblock
//! commands.

use crate::backoff::base_delay;
use crate::decision::{build, Facts};
use crate::model::*;
use crate::text::human;

/// At most this many failure timestamps are accepted.
pub const MAX_FAILURES: usize = 100_000;

pub fn window(now: Timestamp, config: &Config, t: &TaskFailure) -> Result<Decision, PolicyError> {
    let w = &config.window;
    if t.failures.is_empty() {
        return Err(PolicyError::input(
            "situation.task_failed.failures",
            "at least one failure (the one just recorded)",
        ));
    }
    if t.failures.len() > MAX_FAILURES {
        return Err(PolicyError::input("situation.task_failed.failures", format!("at most {MAX_FAILURES} timestamps")));
    }
    let window_ms = w.window / NANOS_PER_MILLI;
    let since = now.saturating_sub(window_ms);
    let count = t.failures.iter().filter(|&&at| at > since).count().max(1) as u32;
    let counted = Facts { attempt: count, max_attempts: w.limit, ..Facts::default() };
    if count >= w.limit {
        let why = format!(
            "blocked: {count} task failures in the last {} reached the limit of {}; re-enqueueing would repeat the failure. Unblock with: {}",
            human(w.window),
            w.limit,
            w.unblock_commands.join(" | ")
        );
        let breaker = CircuitBreaker {
            breaker: "window".to_string(),
            signature: String::new(),
            count,
            threshold: w.limit,
            manual: None,
            look_at: format!("the task failures of the last {}", human(w.window)),
            unblock_commands: w.unblock_commands.clone(),
        };
        return Ok(build(Action::Block, why, Facts { circuit_breaker: Some(breaker), ..counted }));
    }
    let delay = base_delay(w.base_delay, 2, count - 1).min(w.max_delay);
    let why = format!(
        "re-enqueue after {}: {count} of {} allowed task failures in the last {}",
        human(delay),
        w.limit,
        human(w.window)
    );
    Ok(build(Action::Proceed, why, Facts { delay: Some(delay), ..counted }))
}

pub fn cycle(config: &Config, c: &CycleEntry) -> Result<Decision, PolicyError> {
    let max = config.cycle.max_cycles;
    if c.count == 0 {
        return Err(PolicyError::input("situation.cycle_entered.count", "at least 1 (the cycle just completed)"));
    }
    if c.name.len() > 256 {
        return Err(PolicyError::input("situation.cycle_entered.name", "at most 256 bytes"));
    }
    let counted = Facts { attempt: c.count, max_attempts: max, ..Facts::default() };
    if c.count >= max {
        let why = format!(
            "blocked: cycle {:?} re-entered itself {} times, reaching the limit of {max}. Unblock with: {}",
            c.name,
            c.count,
            config.cycle.unblock_commands.join(" | ")
        );
        let breaker = CircuitBreaker {
            breaker: "cycle".to_string(),
            signature: c.name.clone(),
            count: c.count,
            threshold: max,
            manual: None,
            look_at: format!("why {:?} keeps re-entering itself", c.name),
            unblock_commands: config.cycle.unblock_commands.clone(),
        };
        return Ok(build(Action::Block, why, Facts { circuit_breaker: Some(breaker), ..counted }));
    }
    Ok(build(Action::Proceed, format!("cycle {:?}: {} of {max} allowed", c.name, c.count), counted))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN_MS: u64 = 60_000;

    #[test]
    fn eighty_four_failures_become_three_then_a_block() {
        let c = Config::default();
        let t0 = 1_000_000_000_000u64;
        let d1 = window(t0, &c, &TaskFailure { failures: vec![t0] }).unwrap();
        assert_eq!((d1.action, d1.delay), (Action::Proceed, Some(120 * NANOS_PER_SEC)));
        let t1 = t0 + 2 * MIN_MS + 1_000;
        let d2 = window(t1, &c, &TaskFailure { failures: vec![t0, t1] }).unwrap();
        assert_eq!((d2.action, d2.delay), (Action::Proceed, Some(240 * NANOS_PER_SEC)));
        let t2 = t1 + 4 * MIN_MS + 1_000;
        let d3 = window(t2, &c, &TaskFailure { failures: vec![t0, t1, t2] }).unwrap();
        assert_eq!(d3.action, Action::Block);
        assert_eq!(d3.circuit_breaker.unwrap().count, 3);
    }

    #[test]
    fn failures_outside_the_window_do_not_count() {
        let c = Config::default();
        let now = 10 * 60 * MIN_MS;
        let d = window(now, &c, &TaskFailure { failures: vec![now - 120 * MIN_MS, now - 61 * MIN_MS, now] }).unwrap();
        assert_eq!(d.action, Action::Proceed);
        assert_eq!(d.attempt, 1);
    }

    #[test]
    fn raised_limit_doubles_then_caps_at_thirty_minutes() {
        let mut c = Config::default();
        c.window.limit = 10;
        let t0 = 1_000_000_000_000u64;
        let delays: Vec<u64> = (1..=6u64)
            .map(|n| {
                let failures: Vec<u64> = (0..n).map(|i| t0 + i * MIN_MS).collect();
                let d = window(t0 + (n - 1) * MIN_MS, &c, &TaskFailure { failures }).unwrap();
                assert_eq!(d.action, Action::Proceed);
                d.delay.unwrap() / (60 * NANOS_PER_SEC)
            })
            .collect();
        assert_eq!(delays, vec![2, 4, 8, 16, 30, 30]);
    }

    #[test]
    fn bad_input_is_named() {
        let c = Config::default();
        let e = window(0, &c, &TaskFailure { failures: vec![] }).unwrap_err();
        assert!(matches!(e, PolicyError::InvalidInput(f) if f.field == "situation.task_failed.failures"));
        let e = window(0, &c, &TaskFailure { failures: vec![0; MAX_FAILURES + 1] }).unwrap_err();
        assert!(matches!(e, PolicyError::InvalidInput(f) if f.rule.contains("100000")));
        let e = cycle(&c, &CycleEntry { name: "pr".into(), count: 0 }).unwrap_err();
        assert!(matches!(e, PolicyError::InvalidInput(f) if f.field == "situation.cycle_entered.count"));
    }

    #[test]
    fn cycle_blocks_at_limit() {
        let c = Config::default();
        assert_eq!(cycle(&c, &CycleEntry { name: "pr".into(), count: 2 }).unwrap().action, Action::Proceed);
        let d = cycle(&c, &CycleEntry { name: "pr".into(), count: 3 }).unwrap();
        assert_eq!(d.action, Action::Block);
        assert_eq!(d.circuit_breaker.unwrap().signature, "pr");
    }
}
