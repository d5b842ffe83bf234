//! The identical-failure circuit breaker over a work item's history.
//!
//! One pass over the history, newest event first, reads only the events of
//! the asked breaker kind (an event whose `breaker` is empty applies to every
//! breaker):
//!
//! - **Count.** The newest failure of the actor sets the target signature
//!   (`signature(detail, check)`, the check only for `check-and-signature`);
//!   each earlier failure of the actor with the same signature adds one. The
//!   count stops at a failure with a different signature (progress), at a
//!   `success` of the actor, at a `cycle-reset` or `reclassified` marker when
//!   that boundary is listed in the breaker's `reset-on` (a boundary not
//!   listed is ignored), at a `manual-unblock` when `manual` is listed, and
//!   always at a `reset`. Failures and successes of other actors are skipped;
//!   markers and manual events count whoever posted them.
//! - **Manual controls.** The newest of `force-open`, `force-close` and
//!   `reset` decides: `force-open` holds the breaker open (block) unless a
//!   newer `manual-unblock` ended it; `force-close` holds it closed (never
//!   trips); `reset` clears both. Force events are not count boundaries.
//! - **Exemption.** When the count reaches the threshold and the newest
//!   failure carries a diagnosis, the action is `refresh` instead of a trip,
//!   once per run of identical failures: if an earlier failure of the same
//!   run that had already reached the threshold carried a diagnosis, the
//!   refresh was tried and did not help, so the breaker trips.
//!
//! The scan ends as soon as the count has stopped and the manual state is
//! known, and reads at most [`MAX_EVENTS`] events (more is `invalid-input`).

use crate::decision::{build, Facts};
use crate::model::*;
use crate::signature::signature;

/// At most this many history events are accepted.
pub const MAX_EVENTS: usize = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Forced {
    Open,
    Closed,
}

/// What one scan of the history found.
struct Scan<'a> {
    target: Option<String>,
    count: u32,
    newest: Option<&'a HistoryEvent>,
    /// Smallest position (0 = newest) > 0 of a counted failure with a diagnosis.
    earlier_diagnosis: Option<u32>,
    stopped_by: Option<String>,
    forced: Option<Forced>,
}

fn applies(e: &HistoryEvent, kind: &str) -> bool {
    e.breaker.is_empty() || e.breaker == kind
}

fn diagnosis(e: &HistoryEvent) -> Option<&str> {
    e.diagnosis.as_deref().map(str::trim).filter(|d| !d.is_empty())
}

impl<'a> Scan<'a> {
    /// Still counting: no boundary met yet.
    fn counting(&self) -> bool {
        self.stopped_by.is_none()
    }

    /// The count stops here, for `why` (the first boundary met wins).
    fn stop(&mut self, why: impl Into<String>) {
        if self.counting() {
            self.stopped_by = Some(why.into());
        }
    }

    /// A failure of the actor with signature `sig`: the target, one more of
    /// it, or a different fault that ends the count.
    fn failure(&mut self, e: &'a HistoryEvent, sig: String) {
        match &self.target {
            None => {
                self.target = Some(sig);
                self.count = 1;
                self.newest = Some(e);
            }
            Some(t) if *t == sig => {
                if diagnosis(e).is_some() && self.earlier_diagnosis.is_none() {
                    self.earlier_diagnosis = Some(self.count);
                }
                self.count += 1;
            }
            Some(_) => self.stop(format!("an earlier failure with a different signature ({sig:?})")),
        }
    }
}

fn scan<'a>(b: &BreakerConfig, actor: &str, history: &'a [HistoryEvent]) -> Scan<'a> {
    let mut s = Scan { target: None, count: 0, newest: None, earlier_diagnosis: None, stopped_by: None, forced: None };
    let mut manual_known = false;
    let mut unblocked_after = false;
    let mut last: Option<(&str, Option<&str>, String)> = None;
    let resets = |r: ResetOn| b.reset_on.contains(&r);
    for e in history.iter().rev() {
        if !s.counting() && manual_known {
            break;
        }
        if !applies(e, &b.kind) {
            continue;
        }
        match e.kind {
            EventKind::Failure if e.actor == actor && s.counting() => {
                let check = match b.same_failure {
                    SameFailure::CheckAndSignature => e.check.as_deref(),
                    SameFailure::Signature => None,
                };
                // Consecutive events often repeat the detail verbatim: reuse.
                let sig = match &last {
                    Some((d, c, sig)) if *d == e.detail.as_str() && *c == check => sig.clone(),
                    _ => signature(&e.detail, check),
                };
                last = Some((e.detail.as_str(), check, sig.clone()));
                s.failure(e, sig);
            }
            EventKind::Success if e.actor == actor => s.stop("a non-failure by the same actor"),
            EventKind::Failure | EventKind::Success => {}
            EventKind::CycleReset if resets(ResetOn::CycleReset) => s.stop("a cycle-reset marker"),
            EventKind::Reclassified if resets(ResetOn::Reclassified) => s.stop("a reclassified marker"),
            EventKind::CycleReset | EventKind::Reclassified => {}
            EventKind::ManualUnblock => {
                unblocked_after = true;
                if resets(ResetOn::Manual) {
                    s.stop("a manual unblock");
                }
            }
            EventKind::Reset => {
                s.stop("a manual reset");
                manual_known = true;
            }
            EventKind::ForceOpen | EventKind::ForceClose if !manual_known => {
                manual_known = true;
                let open = e.kind == EventKind::ForceOpen;
                if !open || !unblocked_after {
                    s.forced = Some(if open { Forced::Open } else { Forced::Closed });
                }
            }
            EventKind::ForceOpen | EventKind::ForceClose => {}
        }
    }
    s
}

fn record(b: &BreakerConfig, sig: &str, count: u32, manual: Option<&str>) -> CircuitBreaker {
    CircuitBreaker {
        breaker: b.kind.clone(),
        signature: sig.to_string(),
        count,
        threshold: b.threshold,
        manual: manual.map(str::to_string),
        look_at: b.look_at.clone(),
        unblock_commands: b.unblock_commands.clone(),
    }
}

pub fn decide(config: &Config, w: &WorkFailure) -> Result<Decision, PolicyError> {
    let Some(b) = config.breakers.iter().find(|b| b.kind == w.breaker) else {
        let kinds: Vec<&str> = config.breakers.iter().map(|b| b.kind.as_str()).collect();
        return Err(PolicyError::input(
            "situation.work_failed.breaker",
            format!("a configured breaker kind (one of: {}); {:?} is not configured", kinds.join(", "), w.breaker),
        ));
    };
    if w.actor.len() > 256 {
        return Err(PolicyError::input("situation.work_failed.actor", "at most 256 bytes"));
    }
    if w.history.len() > MAX_EVENTS {
        return Err(PolicyError::input("situation.work_failed.history", format!("at most {MAX_EVENTS} events")));
    }
    let s = scan(b, &w.actor, &w.history);
    let (action, why, breaker) = verdict(b, &w.actor, &s);
    let facts = Facts {
        class: s.target.as_ref().map(|_| FailureClass::Work),
        attempt: s.count,
        max_attempts: b.threshold,
        circuit_breaker: breaker,
        ..Facts::default()
    };
    Ok(build(action, why, facts))
}

/// The action, the reasoning and the breaker record of one scan.
fn verdict(b: &BreakerConfig, actor: &str, s: &Scan) -> (Action, String, Option<CircuitBreaker>) {
    let sig = s.target.clone().unwrap_or_default();
    let unblock = b.unblock_commands.join(" | ");
    let stop = s.stopped_by.as_deref().map(|x| format!(", counted back to {x}")).unwrap_or_default();
    match (s.forced, s.target.is_some()) {
        (Some(Forced::Open), _) => (
            Action::Block,
            format!(
                "circuit breaker {:?} is forced open (isolated) by a manual force-open: the work stays blocked until a force-close, reset or manual-unblock; human intervention is required: look at {}; unblock with: {unblock}",
                b.kind, b.look_at
            ),
            Some(record(b, &sig, s.count, Some("force-open"))),
        ),
        (forced, false) => {
            let closed = forced == Some(Forced::Closed);
            let note = if closed { "; forced closed by a manual force-close" } else { "" };
            (
                Action::Proceed,
                format!("circuit breaker {:?}: no failure of actor {actor:?} since the last boundary; the loop goes on{note}", b.kind),
                closed.then(|| record(b, "", 0, Some("force-close"))),
            )
        }
        (Some(Forced::Closed), true) => (
            Action::Proceed,
            format!(
                "circuit breaker {:?} is forced closed by a manual force-close: it never trips until a force-open or reset; {} consecutive identical failures of actor {actor:?} (threshold {}) with signature {sig:?}{stop}",
                b.kind, s.count, b.threshold
            ),
            Some(record(b, &sig, s.count, Some("force-close"))),
        ),
        (None, true) if s.count < b.threshold => (
            Action::Proceed,
            format!(
                "circuit breaker {:?}: {} of {} consecutive identical failures of actor {actor:?} with signature {sig:?}{stop}; the loop goes on",
                b.kind, s.count, b.threshold
            ),
            None,
        ),
        (None, true) => at_threshold(b, actor, s, &sig, &unblock),
    }
}

/// At the threshold: a refresh when the newest failure carries a diagnosis
/// not yet spent on this run of failures, else a trip.
fn at_threshold(
    b: &BreakerConfig,
    actor: &str,
    s: &Scan,
    sig: &str,
    unblock: &str,
) -> (Action, String, Option<CircuitBreaker>) {
    let newest_diagnosis = s.newest.and_then(diagnosis);
    let spent = s.earlier_diagnosis.is_some_and(|j| j <= s.count - b.threshold);
    match newest_diagnosis {
        Some(diag) if !spent => (
            Action::Refresh,
            format!(
                "circuit breaker {:?} exempted: {} consecutive identical failures of actor {actor:?} reached the threshold of {} with signature {sig:?}, but the newest failure carries a diagnosis ({diag}); refresh the work (e.g. rebase) instead of tripping",
                b.kind, s.count, b.threshold
            ),
            None,
        ),
        _ => {
            let already = if spent && newest_diagnosis.is_some() {
                " (a diagnosis already exempted this run of failures once and the refresh did not help)"
            } else {
                ""
            };
            (
                Action::Block,
                format!(
                    "circuit breaker {:?} tripped: {} consecutive identical failures of actor {actor:?} reached the threshold of {} with signature {sig:?}{already}; human intervention is required: look at {}; unblock with: {unblock}",
                    b.kind, s.count, b.threshold, b.look_at
                ),
                Some(record(b, sig, s.count, None)),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: EventKind, actor: &str, detail: &str) -> HistoryEvent {
        HistoryEvent {
            at: 0,
            kind,
            breaker: "build".into(),
            actor: actor.into(),
            detail: detail.into(),
            check: None,
            diagnosis: None,
        }
    }
    fn fail(detail: &str) -> HistoryEvent {
        ev(EventKind::Failure, "builder", detail)
    }
    fn mark(kind: EventKind) -> HistoryEvent {
        HistoryEvent { breaker: String::new(), ..ev(kind, "human", "") }
    }
    fn ask(history: Vec<HistoryEvent>) -> Decision {
        decide(&Config::default(), &WorkFailure { breaker: "build".into(), actor: "builder".into(), history }).unwrap()
    }
    const E1: &str = "error[E0425]: cannot find value `x` in this scope\n --> src/main.rs:3:13";
    const E1B: &str = "error[E0425]: cannot find value `x` in this scope\n --> src/main.rs:44:1";
    const E2: &str = "error: unused variable `y` (deny lint) at 0x1f";

    #[test]
    fn three_identical_failures_trip_with_record() {
        let d = ask(vec![fail(E1), fail(E1B), fail(E1)]);
        assert_eq!(d.action, Action::Block);
        let cb = d.circuit_breaker.unwrap();
        assert_eq!((cb.count, cb.threshold, cb.manual), (3, 3, None));
        assert_eq!(cb.signature, "error[E0425]: cannot find value `x` in this scope");
        assert!(
            d.reasoning.contains("human intervention is required") && d.reasoning.contains("backstop-unblock"),
            "{}",
            d.reasoning
        );
    }

    #[test]
    fn a_changed_fault_stops_the_count() {
        let d = ask(vec![fail(E1), fail(E2), fail(E1)]);
        assert_eq!((d.action, d.attempt, d.max_attempts), (Action::Proceed, 1, 3));
    }

    #[test]
    fn success_other_actors_and_boundaries() {
        let other = ev(EventKind::Failure, "inspector", E2);
        let d = ask(vec![fail(E1), other.clone(), fail(E1), other, fail(E1)]);
        assert_eq!(d.action, Action::Block, "other actors are skipped");
        let d = ask(vec![fail(E1), ev(EventKind::Success, "builder", ""), fail(E1), fail(E1)]);
        assert_eq!((d.action, d.attempt), (Action::Proceed, 2));
        let d = ask(vec![fail(E1), ev(EventKind::Success, "inspector", ""), fail(E1), fail(E1)]);
        assert_eq!(d.action, Action::Block, "a success of another actor is skipped");
        for k in [EventKind::CycleReset, EventKind::Reclassified, EventKind::ManualUnblock, EventKind::Reset] {
            let d = ask(vec![fail(E1), fail(E1), mark(k), fail(E1)]);
            assert_eq!((d.action, d.attempt), (Action::Proceed, 1), "{k:?}");
        }
    }

    #[test]
    fn a_boundary_not_in_reset_on_is_ignored() {
        let mut c = Config::default();
        c.breakers[0].reset_on = vec![ResetOn::Manual];
        let w = WorkFailure {
            breaker: "build".into(),
            actor: "builder".into(),
            history: vec![fail(E1), fail(E1), mark(EventKind::CycleReset), fail(E1)],
        };
        assert_eq!(decide(&c, &w).unwrap().action, Action::Block);
        c.breakers[0].reset_on = vec![ResetOn::CycleReset];
        let w = WorkFailure { history: vec![fail(E1), fail(E1), mark(EventKind::ManualUnblock), fail(E1)], ..w };
        assert_eq!(decide(&c, &w).unwrap().action, Action::Block);
        // `reset` always clears.
        let w = WorkFailure { history: vec![fail(E1), fail(E1), mark(EventKind::Reset), fail(E1)], ..w };
        assert_eq!(decide(&c, &w).unwrap().action, Action::Proceed);
    }

    #[test]
    fn events_of_another_breaker_kind_are_skipped() {
        let mut review = mark(EventKind::CycleReset);
        review.breaker = "review".into();
        let d = ask(vec![fail(E1), fail(E1), review, fail(E1)]);
        assert_eq!(d.action, Action::Block);
    }

    #[test]
    fn diagnosis_exempts_once() {
        let mut last = fail(E1);
        last.diagnosis = Some("stale base: the missing symbols exist on main".into());
        let d = ask(vec![fail(E1), fail(E1), last.clone()]);
        assert_eq!(d.action, Action::Refresh);
        assert!(d.reasoning.contains("stale base"), "{}", d.reasoning);
        assert!(d.circuit_breaker.is_none());
        // The refresh did not help: the same failure again, diagnosed again.
        let d = ask(vec![fail(E1), fail(E1), last.clone(), last.clone()]);
        assert_eq!(d.action, Action::Block);
        assert!(d.reasoning.contains("already exempted"), "{}", d.reasoning);
        // A diagnosis below the threshold was not an exemption: it is not spent.
        let d = ask(vec![last.clone(), fail(E1), last]);
        assert_eq!(d.action, Action::Refresh);
    }

    #[test]
    fn manual_controls() {
        let d = ask(vec![mark(EventKind::ForceOpen), fail(E1)]);
        assert_eq!(d.action, Action::Block);
        assert_eq!(d.circuit_breaker.unwrap().manual.as_deref(), Some("force-open"));
        let d = ask(vec![mark(EventKind::ForceOpen)]);
        assert_eq!(d.action, Action::Block, "isolation holds without failures");
        let d = ask(vec![mark(EventKind::ForceOpen), mark(EventKind::ManualUnblock), fail(E1)]);
        assert_eq!(d.action, Action::Proceed);
        let d = ask(vec![mark(EventKind::ForceOpen), mark(EventKind::ForceClose), fail(E1), fail(E1), fail(E1)]);
        assert_eq!(d.action, Action::Proceed);
        let cb = d.circuit_breaker.unwrap();
        assert_eq!((cb.manual.as_deref(), cb.count), (Some("force-close"), 3));
        // manual-unblock does not end a force-close; force-open and reset do.
        let d = ask(vec![mark(EventKind::ForceClose), mark(EventKind::ManualUnblock), fail(E1), fail(E1), fail(E1)]);
        assert_eq!(d.action, Action::Proceed);
        let d = ask(vec![
            mark(EventKind::ForceClose),
            fail(E1),
            fail(E1),
            mark(EventKind::Reset),
            fail(E1),
            fail(E1),
            fail(E1),
        ]);
        assert_eq!((d.action, d.circuit_breaker.unwrap().manual), (Action::Block, None));
        // Force events are not count boundaries: the failures under force-close still count.
        let d = ask(vec![fail(E1), mark(EventKind::ForceClose), fail(E1), fail(E1), mark(EventKind::ForceOpen)]);
        let cb = d.circuit_breaker.unwrap();
        assert_eq!((d.action, cb.manual.as_deref(), cb.count), (Action::Block, Some("force-open"), 3));
    }

    #[test]
    fn review_leads_with_check_and_trips_at_two() {
        let f = |check: &str, detail: &str| HistoryEvent {
            breaker: "review".into(),
            check: Some(check.into()),
            ..ev(EventKind::Failure, "inspector", detail)
        };
        let ask = |h: Vec<HistoryEvent>| {
            decide(&Config::default(), &WorkFailure { breaker: "review".into(), actor: "inspector".into(), history: h })
                .unwrap()
        };
        let d =
            ask(vec![f("lint", "src/a.ts:3:1 error no-unused-vars"), f("lint", "src/a.ts:9:1 error no-unused-vars")]);
        assert_eq!(d.action, Action::Block);
        assert_eq!(d.circuit_breaker.unwrap().signature, "lint: src/a.ts:<n>:<n> error no-unused-vars");
        let d =
            ask(vec![f("test", "src/a.ts:3:1 error no-unused-vars"), f("lint", "src/a.ts:9:1 error no-unused-vars")]);
        assert_eq!(d.action, Action::Proceed, "another check is another failure");
    }

    #[test]
    fn bad_input_is_named() {
        let w = WorkFailure { breaker: "deploy".into(), actor: "a".into(), history: vec![] };
        let e = decide(&Config::default(), &w).unwrap_err();
        assert!(
            matches!(&e, PolicyError::InvalidInput(f) if f.field == "situation.work_failed.breaker" && f.rule.contains("build")),
            "{e:?}"
        );
        let w = WorkFailure {
            breaker: "build".into(),
            actor: "a".into(),
            history: vec![mark(EventKind::Success); MAX_EVENTS + 1],
        };
        let e = decide(&Config::default(), &w).unwrap_err();
        assert!(matches!(&e, PolicyError::InvalidInput(f) if f.field == "situation.work_failed.history"), "{e:?}");
    }

    #[test]
    fn a_long_history_of_identical_failures_is_one_pass() {
        let h = vec![fail(E1); MAX_EVENTS];
        let d = ask(h);
        assert_eq!((d.action, d.attempt), (Action::Block, MAX_EVENTS as u32));
    }
}
