//! Defaults and validation of the configuration. Every bound here is the one
//! documented in `wit/types.wit`; a value outside it is rejected with an error
//! that names the field and the rule.

use crate::model::*;
use crate::text::human;

const SEC: u64 = NANOS_PER_SEC;
const MIN: u64 = 60 * SEC;
const HOUR: u64 = 60 * MIN;
const DAY: u64 = 24 * HOUR;

/// The ceiling on `transport.max-attempts` (the seed's `MAX_ATTEMPTS_CEILING`).
pub const MAX_ATTEMPTS_CEILING: u32 = 10;
/// At most this many breakers may be configured.
pub const MAX_BREAKERS: usize = 32;

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            max_attempts: 3,
            budget: 300 * SEC,
            initial_delay: 10 * SEC,
            multiplier: 2,
            hint_ceiling: 60 * SEC,
            retry_bare_signals: false,
            max_elapsed: 0,
        }
    }
}

impl Default for EvidenceConfig {
    fn default() -> Self {
        EvidenceConfig { scan_bytes: 65_536, echo_bytes: 2_000 }
    }
}

impl Default for ResumeConfig {
    fn default() -> Self {
        ResumeConfig {
            max_resumes: 0,
            base_delay: 30 * SEC,
            max_delay: 5 * MIN,
            quota_cap_percent: 85,
            reset_margin: 60 * SEC,
            max_reset_wait: 7 * DAY,
        }
    }
}

impl Default for WindowConfig {
    fn default() -> Self {
        WindowConfig {
            window: 60 * MIN,
            limit: 3,
            base_delay: 2 * MIN,
            max_delay: 30 * MIN,
            unblock_commands: vec!["backstop-unblock <work-item>".to_string()],
        }
    }
}

impl Default for CycleConfig {
    fn default() -> Self {
        CycleConfig { max_cycles: 3, unblock_commands: vec!["backstop-unblock <work-item>".to_string()] }
    }
}

/// The default breakers: colony's build guard (3) and review guard (2).
pub fn default_breakers() -> Vec<BreakerConfig> {
    vec![
        BreakerConfig {
            kind: "build".to_string(),
            same_failure: SameFailure::Signature,
            threshold: 3,
            on_trip: OnTrip::Block,
            reset_on: vec![ResetOn::CycleReset, ResetOn::Reclassified, ResetOn::Manual],
            look_at: "the build output of the repeated failure; the signature names its first meaningful line"
                .to_string(),
            unblock_commands: vec!["backstop-unblock <work-item>".to_string()],
        },
        BreakerConfig {
            kind: "review".to_string(),
            same_failure: SameFailure::CheckAndSignature,
            threshold: 2,
            on_trip: OnTrip::Block,
            reset_on: vec![ResetOn::CycleReset, ResetOn::Reclassified, ResetOn::Manual],
            look_at: "the failing review check; the signature leads with its name".to_string(),
            unblock_commands: vec!["backstop-unblock <work-item>".to_string()],
        },
    ]
}

impl Default for Config {
    fn default() -> Self {
        Config {
            transport: TransportConfig::default(),
            evidence: EvidenceConfig::default(),
            resume: ResumeConfig::default(),
            breakers: default_breakers(),
            window: WindowConfig::default(),
            cycle: CycleConfig::default(),
            classify: ClassifyConfig::default(),
        }
    }
}

fn range_u32(field: &str, v: u32, lo: u32, hi: u32) -> Result<(), PolicyError> {
    if v < lo {
        return Err(PolicyError::config(field, format!("at least {lo}")));
    }
    if v > hi {
        return Err(PolicyError::config(field, format!("at most {hi}")));
    }
    Ok(())
}

fn range_ns(field: &str, v: u64, lo: u64, hi: u64) -> Result<(), PolicyError> {
    if v < lo {
        return Err(PolicyError::config(field, format!("at least {} ns ({})", lo, human(lo))));
    }
    if v > hi {
        return Err(PolicyError::config(field, format!("at most {} ns ({})", hi, human(hi))));
    }
    Ok(())
}

fn commands(field: &str, v: &[String]) -> Result<(), PolicyError> {
    if v.is_empty() || v.iter().all(|c| c.trim().is_empty()) {
        return Err(PolicyError::config(field, "how a human unblocks it is unanswered: give at least one command"));
    }
    if v.len() > 16 {
        return Err(PolicyError::config(field, "at most 16 commands"));
    }
    if v.iter().any(|c| c.len() > 1024) {
        return Err(PolicyError::config(field, "each command at most 1024 bytes"));
    }
    Ok(())
}

/// Checks every bound of the configuration.
pub fn validate(c: &Config) -> Result<(), PolicyError> {
    let t = &c.transport;
    range_u32("config.transport.max_attempts", t.max_attempts, 1, MAX_ATTEMPTS_CEILING)?;
    range_ns("config.transport.budget", t.budget, NANOS_PER_MILLI, DAY)?;
    range_ns("config.transport.initial_delay", t.initial_delay, NANOS_PER_MILLI, HOUR)?;
    range_u32("config.transport.multiplier", t.multiplier, 1, 10)?;
    range_ns("config.transport.hint_ceiling", t.hint_ceiling, SEC, DAY)?;
    if t.max_elapsed != 0 {
        range_ns("config.transport.max_elapsed", t.max_elapsed, SEC, 7 * DAY)
            .map_err(|_| PolicyError::config("config.transport.max_elapsed", "0 (off) or from 1 s to 7 d"))?;
    }

    let e = &c.evidence;
    range_u32("config.evidence.scan_bytes", e.scan_bytes, 256, 16 * 1024 * 1024)?;
    range_u32("config.evidence.echo_bytes", e.echo_bytes, 0, 65_536)?;

    let r = &c.resume;
    range_u32("config.resume.max_resumes", r.max_resumes, 0, 100)?;
    range_ns("config.resume.base_delay", r.base_delay, SEC, HOUR)?;
    if r.max_delay < r.base_delay {
        return Err(PolicyError::config("config.resume.max_delay", "at least config.resume.base_delay"));
    }
    range_ns("config.resume.max_delay", r.max_delay, SEC, DAY)?;
    range_u32("config.resume.quota_cap_percent", r.quota_cap_percent, 1, 100)?;
    range_ns("config.resume.reset_margin", r.reset_margin, 0, HOUR)?;
    range_ns("config.resume.max_reset_wait", r.max_reset_wait, MIN, 31 * DAY)?;

    if c.breakers.len() > MAX_BREAKERS {
        return Err(PolicyError::config("config.breakers", format!("at most {MAX_BREAKERS} breakers")));
    }
    for (i, b) in c.breakers.iter().enumerate() {
        breaker(i, b, &c.breakers[..i])?;
    }

    let w = &c.window;
    range_ns("config.window.window", w.window, SEC, 30 * DAY)?;
    range_u32("config.window.limit", w.limit, 1, 1000)?;
    range_ns("config.window.base_delay", w.base_delay, SEC, DAY)?;
    if w.max_delay < w.base_delay {
        return Err(PolicyError::config("config.window.max_delay", "at least config.window.base_delay"));
    }
    range_ns("config.window.max_delay", w.max_delay, SEC, 7 * DAY)?;
    commands("config.window.unblock_commands", &w.unblock_commands)?;

    range_u32("config.cycle.max_cycles", c.cycle.max_cycles, 1, 1000)?;
    commands("config.cycle.unblock_commands", &c.cycle.unblock_commands)?;
    operator_markers(&c.classify.markers)
}

/// At most this many operator markers.
pub const MAX_OPERATOR_MARKERS: usize = 64;

/// The operator's markers follow the rules of the shipped tables
/// (`markers::check`), each error naming the entry's index and field.
fn operator_markers(list: &[Marker]) -> Result<(), PolicyError> {
    if list.len() > MAX_OPERATOR_MARKERS {
        return Err(PolicyError::config("config.classify.markers", format!("at most {MAX_OPERATOR_MARKERS} entries")));
    }
    for (i, m) in list.iter().enumerate() {
        let at = |field: &str| format!("config.classify.markers[{i}].{field}");
        crate::markers::check(m).map_err(|(field, rule)| PolicyError::config(at(field), rule))?;
        if let Some(rule) = crate::markers::duplicate(&list[..i], m) {
            return Err(PolicyError::config(at("marker"), rule));
        }
    }
    Ok(())
}

/// Checks breaker `i` against its bounds and the breakers before it.
fn breaker(i: usize, b: &BreakerConfig, before: &[BreakerConfig]) -> Result<(), PolicyError> {
    {
        let f = |name: &str| format!("config.breakers[{i}].{name}");
        if b.kind.trim().is_empty() {
            return Err(PolicyError::config(
                f("kind"),
                "what counts as the same failure is unanswered: name the failure kind",
            ));
        }
        if b.kind.len() > 64 {
            return Err(PolicyError::config(f("kind"), "at most 64 bytes"));
        }
        if b.kind == "window" || b.kind == "cycle" {
            return Err(PolicyError::config(
                f("kind"),
                "not `window` or `cycle`: those name the windowed and cycle limits in the record",
            ));
        }
        if before.iter().any(|o| o.kind == b.kind) {
            return Err(PolicyError::config(f("kind"), format!("unique: {:?} is configured twice", b.kind)));
        }
        if b.threshold == 0 {
            return Err(PolicyError::config(
                f("threshold"),
                "how many are enough is unanswered: give a threshold from 1 to 100",
            ));
        }
        range_u32(&f("threshold"), b.threshold, 1, 100)?;
        if b.reset_on.is_empty() {
            return Err(PolicyError::config(
                f("reset_on"),
                "what resets the count is unanswered: list at least one reset",
            ));
        }
        if b.look_at.trim().is_empty() {
            return Err(PolicyError::config(
                f("look_at"),
                "how a human unblocks it is unanswered: say what to look at",
            ));
        }
        if b.look_at.len() > 1024 {
            return Err(PolicyError::config(f("look_at"), "at most 1024 bytes"));
        }
        commands(&f("unblock_commands"), &b.unblock_commands)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        validate(&Config::default()).unwrap();
    }

    #[test]
    fn attempts_above_ceiling_name_field_and_rule() {
        let mut c = Config::default();
        c.transport.max_attempts = 11;
        assert_eq!(validate(&c), Err(PolicyError::config("config.transport.max_attempts", "at most 10")));
        c.transport.max_attempts = 0;
        assert_eq!(validate(&c), Err(PolicyError::config("config.transport.max_attempts", "at least 1")));
    }

    #[test]
    fn breaker_missing_unblock_is_named() {
        let mut c = Config::default();
        c.breakers[0].unblock_commands.clear();
        let err = validate(&c).unwrap_err();
        match err {
            PolicyError::InvalidConfig(e) => {
                assert_eq!(e.field, "config.breakers[0].unblock_commands");
                assert!(e.rule.contains("unblock"), "{}", e.rule);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn each_unanswered_checklist_question_is_named() {
        type Unanswered = (fn(&mut BreakerConfig), &'static str, &'static str);
        let cases: [Unanswered; 5] = [
            (|b| b.kind.clear(), "kind", "what counts as the same failure"),
            (|b| b.threshold = 0, "threshold", "how many are enough"),
            (|b| b.reset_on.clear(), "reset_on", "what resets the count"),
            (|b| b.look_at = " ".into(), "look_at", "how a human unblocks it"),
            (|b| b.unblock_commands = vec![String::new()], "unblock_commands", "how a human unblocks it"),
        ];
        for (break_it, field, answer) in cases {
            let mut c = Config::default();
            break_it(&mut c.breakers[1]);
            match validate(&c).unwrap_err() {
                PolicyError::InvalidConfig(e) => {
                    assert_eq!(e.field, format!("config.breakers[1].{field}"));
                    assert!(e.rule.contains(answer) && e.rule.contains("unanswered"), "{}", e.rule);
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn breaker_kinds_are_unique_and_not_limit_names() {
        let mut c = Config::default();
        c.breakers[1].kind = "build".into();
        assert!(
            matches!(validate(&c), Err(PolicyError::InvalidConfig(e)) if e.field == "config.breakers[1].kind" && e.rule.contains("unique"))
        );
        c.breakers[1].kind = "cycle".into();
        assert!(matches!(validate(&c), Err(PolicyError::InvalidConfig(e)) if e.field == "config.breakers[1].kind"));
    }
}
