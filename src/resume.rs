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
use crate::classify::classify_configured;
use crate::decision::{build, later, Facts};
use crate::hints::{ignored_note, server_wait};
use crate::model::*;
use crate::reset;
use crate::text::{format_utc, head, human};

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

/// One run stop, as the steps below read it.
struct Ctx<'a> {
    now: Timestamp,
    entropy: u64,
    rc: &'a ResumeConfig,
    r: &'a RunStop,
    /// The normalised code.
    code: &'a str,
    /// `code X`, or `no error code`, for reasonings.
    shown: String,
    /// The evidence's classification; none for `BUDGET_EXCEEDED`, which ignores it.
    c: Option<Classification>,
}

/// What a step decided: everything of the decision that differs by step.
struct Outcome {
    action: Action,
    why: String,
    retryable: bool,
    delay: Option<Duration>,
    resume_at: Option<Timestamp>,
    server_hint: Option<String>,
    reset_hint: Option<String>,
    auto: Option<RunAutoResumed>,
}

impl Outcome {
    fn stop(action: Action, why: String, retryable: bool) -> Outcome {
        Outcome {
            action,
            why,
            retryable,
            delay: None,
            resume_at: None,
            server_hint: None,
            reset_hint: None,
            auto: None,
        }
    }
}

/// The wait before a resume.
struct Wait {
    delay: Duration,
    reason: &'static str,
    how: String,
    server_hint: Option<String>,
}

pub fn decide(now: Timestamp, entropy: u64, config: &Config, r: &RunStop) -> Result<Decision, PolicyError> {
    validate(r)?;
    let rc = &config.resume;
    let code = normalize(&r.code);
    let shown = if code.is_empty() { "no error code".to_string() } else { format!("code {code}") };
    let c = match code.as_str() {
        "BUDGET_EXCEEDED" => None,
        _ => r.evidence.as_ref().map(|e| classify_configured(e, config)),
    };
    let x = Ctx { now, entropy, rc, r, code: &code, shown, c };
    let o = not_allowed(&x)
        .or_else(|| vetoed(&x))
        .or_else(|| off_or_spent(&x))
        .or_else(|| budget_stop(&x))
        .unwrap_or_else(|| schedule(&x));
    let facts = Facts {
        classification: x.c.as_ref(),
        delay: o.delay,
        resume_at: o.resume_at,
        attempt: r.resumes_done.saturating_add(1),
        max_attempts: rc.max_resumes,
        retryable: o.retryable,
        server_hint: o.server_hint,
        reset_hint: o.reset_hint,
        run_auto_resumed: o.auto,
        ..Facts::default()
    };
    Ok(build(o.action, o.why, facts))
}

/// Step 2, the allow-list: any other code, an empty one included, fails closed.
fn not_allowed(x: &Ctx) -> Option<Outcome> {
    if ALLOW_LIST.contains(&x.code) {
        return None;
    }
    let why = match FAIL_CLOSED.iter().find(|(k, _)| *k == x.code) {
        Some((_, why)) => why.to_string(),
        None if x.code.is_empty() => "an unclassified stop fails closed".to_string(),
        None => "an unknown code fails closed".to_string(),
    };
    let retryable = x.c.as_ref().is_some_and(|c| c.retryable);
    Some(Outcome::stop(Action::Terminal, format!("not auto-recoverable ({}): {why} — {LEAVE}", x.shown), retryable))
}

/// Whether the run waits for a usage limit's reset.
fn usage(x: &Ctx) -> bool {
    is_usage_code(x.code) || x.c.as_ref().is_some_and(|c| c.class == FailureClass::UsageLimit)
}

/// Step 3, the evidence: `work` or `environmental` evidence vetoes a resume;
/// `EXECUTION_FAILED` resumes only on a transient fault or a usage limit.
fn vetoed(x: &Ctx) -> Option<Outcome> {
    let shown = &x.shown;
    if let Some(c) = x.c.as_ref().filter(|c| matches!(c.class, FailureClass::Work | FailureClass::Environmental)) {
        let why = format!(
            "not auto-recoverable ({shown}): the evidence is classified `{}` (signal {:?}), which a resume meets again — {LEAVE}",
            c.class.as_str(),
            c.signal.as_deref().unwrap_or("")
        );
        return Some(Outcome::stop(Action::Terminal, why, false));
    }
    let transient = x.c.as_ref().is_some_and(|c| c.class == FailureClass::TransientTransport);
    if x.code != "EXECUTION_FAILED" || usage(x) || transient {
        return None;
    }
    let what = match &x.c {
        Some(c) => format!("the evidence is classified `{}`", c.class.as_str()),
        None => "no evidence was given".to_string(),
    };
    let why = format!(
        "not auto-recoverable ({shown}): EXECUTION_FAILED resumes only when its evidence shows a transient fault, and {what} — {LEAVE}"
    );
    Some(Outcome::stop(Action::Terminal, why, x.c.as_ref().is_some_and(|c| c.retryable)))
}

/// Steps 4 and 5: auto-resume off, or its count spent.
fn off_or_spent(x: &Ctx) -> Option<Outcome> {
    let (rc, shown) = (x.rc, &x.shown);
    if rc.max_resumes == 0 {
        let why = format!(
            "auto-resume is off (config.resume.max_resumes is 0): {shown} is auto-recoverable, but nothing resumes it automatically — resume it by hand, or set config.resume.max_resumes"
        );
        return Some(Outcome::stop(Action::Terminal, why, true));
    }
    if x.r.resumes_done >= rc.max_resumes {
        let why = format!(
            "auto-resume bound reached: {} of {} automatic resumes made (config.resume.max_resumes = {}) for {shown} — {LEAVE}",
            x.r.resumes_done, rc.max_resumes, rc.max_resumes
        );
        return Some(Outcome::stop(Action::TerminalBudgetExhausted, why, true));
    }
    None
}

fn cap_name(r: &RunStop) -> &str {
    r.budget_cap.as_deref().map(str::trim).filter(|s| !s.is_empty()).unwrap_or("the budget cap")
}

/// Step 6: `BUDGET_EXCEEDED` resumes only under a raised cap.
fn budget_stop(x: &Ctx) -> Option<Outcome> {
    if x.code != "BUDGET_EXCEEDED" {
        return None;
    }
    let (t, e) = (x.r.budget_tripped_at, x.r.budget_in_effect);
    if matches!((t, e), (Some(t), Some(e)) if e > t) {
        return None;
    }
    let cap = cap_name(x.r);
    let values = match (t, e) {
        (Some(t), Some(e)) => format!("tripped at {t}, {e} in effect"),
        (Some(t), None) => format!("tripped at {t}, no raised value reported"),
        _ => "no raised value reported".to_string(),
    };
    let above = t.map(|t| format!(" above {t}")).unwrap_or_default();
    let why = format!(
        "budget exceeded and no raised cap in effect ({cap}: {values}) — not resuming, which would trip the same cap again; raise {cap}{above} and resume"
    );
    Some(Outcome::stop(Action::Terminal, why, true))
}

/// Steps 7 and 8: the wait, then the quota cap, then the resume.
fn schedule(x: &Ctx) -> Outcome {
    let waited = if usage(x) { usage_wait(x) } else { backoff_wait(x) };
    let w = match waited {
        Ok(w) => w,
        Err(stop) => return *stop,
    };
    let resume_at = later(x.now, w.delay);
    if let Some(mut stop) = quota_stop(x, resume_at) {
        stop.server_hint = w.server_hint;
        return stop;
    }
    let (r, rc) = (x.r, x.rc);
    let raised = match (x.code, r.budget_tripped_at, r.budget_in_effect) {
        ("BUDGET_EXCEEDED", Some(t), Some(e)) => {
            format!("{} raised from {t} to {e}, so it does not trip again at once; ", cap_name(r))
        }
        _ => String::new(),
    };
    let attempt = r.resumes_done + 1;
    let ignored = x.c.as_ref().map(ignored_note).unwrap_or_default();
    let why = format!(
        "{} is auto-recoverable: {raised}automatic resume {attempt} of {} after {} ({}){}{ignored}",
        x.shown,
        rc.max_resumes,
        human(w.delay),
        w.how,
        quota_note(x, resume_at)
    );
    let auto = RunAutoResumed {
        attempt,
        max: rc.max_resumes,
        code: head(x.code, MAX_CODE).to_string(),
        delay: w.delay,
        reason: w.reason.to_string(),
    };
    Outcome {
        delay: Some(w.delay),
        resume_at: Some(resume_at),
        server_hint: w.server_hint,
        reset_hint: x.c.as_ref().and_then(|c| c.reset_hint.clone()),
        auto: Some(auto),
        ..Outcome::stop(Action::Resume, why, true)
    }
}

/// The instant a usage limit resets and how it was said: the server's reset
/// header, else its `retry-after`, else an instant in the text, else a reset
/// relative to the failure.
fn usage_reset(x: &Ctx) -> Option<(Timestamp, String, Option<String>)> {
    let c = x.c.as_ref()?;
    let quoted = c.reset_hint.as_deref().map(|q| format!(" (`{q}`)")).unwrap_or_default();
    if let Some((h, at)) = c.hint(HintKind::UsageLimitReset).and_then(|h| Some((h, h.at?))) {
        let said = format!("the server gives the reset as {} (`{}`)", format_utc(at), h.header);
        return Some((at, said, Some(h.header.clone())));
    }
    if let Some((w, h)) = server_wait(c, x.now) {
        let said = format!("the server asks to wait {} (`{}`)", human(w), h.header);
        return Some((later(x.now, w), said, Some(h.header.clone())));
    }
    if let Some(at) = c.reset_at {
        return Some((at, format!("the limit resets at {}{quoted}", format_utc(at)), None));
    }
    let after = c.reset_after?;
    Some((later(x.now, after), format!("the limit resets {} from now{quoted}", human(after)), None))
}

/// Step 7 for a usage limit: wait for its reset plus the margin; a reset too
/// far away stops; an unknown reset waits the longest backoff.
fn usage_wait(x: &Ctx) -> Result<Wait, Box<Outcome>> {
    let rc = x.rc;
    let Some((at, said, server_hint)) = usage_reset(x) else {
        let delay = backoff::equal_jitter(rc.max_delay, backoff::draw(x.entropy, x.r.resumes_done as u64));
        let said = match x.c.as_ref().and_then(|c| c.reset_hint.as_deref()) {
            Some(q) => format!(
                "the reset is given as `{q}`, which names no unambiguous instant (it has no {}), so no resume time is computed from it",
                reset::lacks(q)
            ),
            None => "the evidence gives no reset time".to_string(),
        };
        let how = format!(
            "usage limit: {said}; trying again after the longest backoff (config.resume.max_delay {}, equal jitter) — a resume before the reset fails fast and counts against max_resumes",
            human(rc.max_delay)
        );
        return Ok(Wait { delay, reason: "usage-limit-unknown-reset", how, server_hint: None });
    };
    let until = at.saturating_sub(x.now).saturating_mul(NANOS_PER_MILLI);
    let delay = until.saturating_add(rc.reset_margin);
    if delay > rc.max_reset_wait {
        let why = format!(
            "usage limit ({}): {said}, a wait of {} with the margin, beyond config.resume.max_reset_wait ({}) — not scheduling it; the run stays resumable: resume it by hand after the reset",
            x.shown,
            human(delay),
            human(rc.max_reset_wait)
        );
        return Err(Box::new(Outcome { server_hint, ..Outcome::stop(Action::Terminal, why, true) }));
    }
    let past = if until == 0 { " (already passed)" } else { "" };
    let how = format!("usage limit: {said}{past}; resuming at the reset plus the {} margin", human(rc.reset_margin));
    Ok(Wait { delay, reason: "usage-limit-reset", how, server_hint })
}

/// Step 7 otherwise: capped exponential backoff; a longer server wait is a
/// floor (never a way to resume sooner); beyond `max_reset_wait` it stops.
fn backoff_wait(x: &Ctx) -> Result<Wait, Box<Outcome>> {
    let rc = x.rc;
    let planned = backoff::delay(rc.base_delay, 2, x.r.resumes_done, rc.max_delay, x.entropy);
    let server = x.c.as_ref().and_then(|c| server_wait(c, x.now)).filter(|(w, _)| *w > planned);
    let Some((w, h)) = server else {
        let how = format!(
            "capped exponential backoff (base {}, cap {}, equal jitter)",
            human(rc.base_delay),
            human(rc.max_delay)
        );
        return Ok(Wait { delay: planned, reason: "auto", how, server_hint: None });
    };
    let server_hint = Some(h.header.clone());
    if w > rc.max_reset_wait {
        let why = format!(
            "{}: the server asks to wait {} (`{}`), beyond config.resume.max_reset_wait ({}) — not scheduling it; the run stays resumable: resume it by hand later",
            x.shown,
            human(w),
            h.header,
            human(rc.max_reset_wait)
        );
        return Err(Box::new(Outcome { server_hint, ..Outcome::stop(Action::Terminal, why, true) }));
    }
    let how = format!("the server asks to wait {} (`{}`), longer than the backoff", human(w), h.header);
    Ok(Wait { delay: w, reason: "server-hint", how, server_hint })
}

/// A reading at or over the cap, unless its window resets by the resume.
fn over_cap(x: &Ctx, q: &QuotaReading, resume_at: Timestamp) -> (bool, bool) {
    let over = q.percent.is_some_and(|p| p >= x.rc.quota_cap_percent as f64);
    let cleared = q.resets_at.is_some_and(|t| t <= resume_at);
    (over, cleared)
}

/// Step 8: any known reading at or over the cap stops, naming every window.
fn quota_stop(x: &Ctx, resume_at: Timestamp) -> Option<Outcome> {
    let over: Vec<String> =
        x.r.quota
            .iter()
            .filter(|q| over_cap(x, q, resume_at) == (true, false))
            .map(|q| format!("{}={}%", q.window.trim(), q.percent.unwrap_or(0.0)))
            .collect();
    if over.is_empty() {
        return None;
    }
    let why = format!(
        "quota cap {}% reached ({}; all readings: {}) — not resuming now, which would draw quota past the cap; {} is auto-recoverable and the run stays resumable: resume it later, when the usage has fallen",
        x.rc.quota_cap_percent,
        over.join(", "),
        readings(x.r),
        x.shown
    );
    Some(Outcome::stop(Action::Terminal, why, true))
}

/// What the quota readings say beside a resume.
fn quota_note(x: &Ctx, resume_at: Timestamp) -> String {
    let (r, cap) = (x.r, x.rc.quota_cap_percent);
    let resetting: Vec<String> = r
        .quota
        .iter()
        .filter(|q| over_cap(x, q, resume_at) == (true, true))
        .map(|q| format!("{} resets at {}", q.window.trim(), format_utc(q.resets_at.unwrap_or(0))))
        .collect();
    if !resetting.is_empty() {
        format!(
            "; quota at or over the {cap}% cap only in windows that reset before the resume ({}; readings: {})",
            resetting.join(", "),
            readings(r)
        )
    } else if r.quota.is_empty() {
        String::new()
    } else if r.quota.iter().any(|q| q.percent.is_none()) {
        format!(
            "; quota under the {cap}% cap where known ({}; an unknown reading never blocks: the count bounds the loop)",
            readings(r)
        )
    } else {
        format!("; quota under the {cap}% cap ({})", readings(r))
    }
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
