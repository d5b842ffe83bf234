//! Usage-limit reset hints. The hint is quoted as written; an instant is
//! computed only when the text states an unambiguous one (an epoch, or a
//! date-time with an explicit UTC offset). A clock time with a zone name, or
//! none, is never turned into an instant: inventing a time zone we were not
//! given would be worse than quoting it.

use std::sync::OnceLock;

use regex_lite::Regex;

use crate::model::{Duration, Timestamp, NANOS_PER_SEC};
use crate::text::head;

/// The hint is cut to this many bytes.
pub const MAX_HINT: usize = 160;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reset {
    /// The reset as written.
    pub hint: Option<String>,
    /// An unambiguous reset instant, ms since the epoch.
    pub at: Option<Timestamp>,
    /// A reset stated relative to the failure.
    pub after: Option<Duration>,
    /// The hint names a calendar date (`retry after 2024-06-27 03:57 UTC`,
    /// `try again after Mon, 13 Jul 2026 19:14:55 GMT`), whether or not it
    /// names one instant: a wait that runs to a stated day.
    pub dated: bool,
    /// The text names the window the limit counts over as an hour or longer
    /// (`tokens per day (TPD)`, `Too many requests in 1 hour`, Google's quota
    /// id `...PerDayPerProjectPerModel-FreeTier`): a window that does not
    /// clear within the transport budget.
    pub long_window: bool,
}

struct Patterns {
    hint: Regex,
    clock: Regex,
    zone: Regex,
    date: Regex,
    epoch_pipe: Regex,
    epoch_json: Regex,
    after_json: Regex,
    dated: Regex,
    relative: Regex,
    unit: Regex,
    long_window: Regex,
}

/// The spelled-out units of a stated wait; `relative` and `unit` also take
/// the one-letter forms (`24h`).
const UNIT_WORDS: &str = "days?|hours?|hrs?|minutes?|mins?|seconds?|secs?";

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    let re = |pattern: String| Regex::new(&pattern).unwrap();
    P.get_or_init(|| Patterns {
        // `wait` counts only before a stated duration (`Please wait 3 hours
        // before trying again`), never as prose (`wait for the lock`).
        hint: re(format!(
            r"(?i)(?:\b|\\[nrt])((?:resets?(?:\s+at)?|try again (?:in|at|after)|retry (?:in|at|after)|expected available in)\s+[^\n\r]+|wait\s+\d{{1,6}}\s*(?:{UNIT_WORDS})\b[^\n\r]*)"
        )),
        clock: Regex::new(r"(?i)\b\d{1,2}(?::\d{2}(?::\d{2})?\s*(?:am|pm)?|\s*(?:am|pm))\b|\b(?:midnight|noon)\b").unwrap(),
        zone: Regex::new(r"(?i)\b(?:utc|gmt|z|[pmce][sd]t|cet|cest|bst|ist|jst|aest|aedt)\b|[+-]\d{2}:?\d{2}\b|\b[a-z]+/[a-z_]+\b|\b(?:pacific|eastern|central|mountain) time\b").unwrap(),
        date: Regex::new(
            r"(?i)\b\d{4}-\d{2}-\d{2}\b|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d{1,2}\b|\b\d{1,2}\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b",
        )
        .unwrap(),
        epoch_pipe: Regex::new(r"(?i)limit reached\|(\d{10,13})\b").unwrap(),
        epoch_json: Regex::new(r#"(?i)"?resets?_at"?\s*[:=]\s*"?(\d{10,13})\b"#).unwrap(),
        after_json: Regex::new(r#"(?i)"?resets?_in_seconds"?\s*[:=]\s*(\d{1,9})\b"#).unwrap(),
        dated: Regex::new(
            r"(?i)\b(\d{4}-\d{2}-\d{2}[t ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?)\s*(z|utc|[+-]\d{2}:?\d{2})\b",
        )
        .unwrap(),
        // A Go duration (`108h48m29s`, `1h0m0s`, `8h13m`) runs its units together.
        relative: re(format!(
            r"(?i)\b(?:in|after|wait)\s+((?:\d{{1,6}}h)?(?:\d{{1,6}}m)?\d{{1,6}}(?:\.\d{{1,9}})?s\b|\d{{1,6}}h\d{{1,6}}m\b|(?:\d{{1,6}}\s*(?:{UNIT_WORDS}|d|h|m|s)\b[\s,]*(?:and\s+)?)+)"
        )),
        // Only ever run over what `relative` matched, so no word boundary
        // after a unit: a Go duration has none between its units. A
        // fraction counts as its whole units (`18.642s` is 18 seconds).
        unit: re(format!(r"(?i)(\d{{1,6}})(?:\.\d{{1,9}})?\s*({UNIT_WORDS}|d|h|m|s)")),
        long_window: Regex::new(
            r"(?i)\b(?:per|each|every)\s+(?:day|hour)\b|\bin (?:1|one|an) hour\b|/\s*(?:day|hour|hr)\b|per(?:day|hour)|\b(?:daily|hourly) (?:limit|quota|cap|allowance|requests?|tokens?)\b",
        )
        .unwrap(),
    })
}

/// Finds the reset hint in the evidence texts (searched in order).
pub fn find_reset(texts: &[&str]) -> Reset {
    let p = patterns();
    let mut out = Reset::default();
    for text in texts {
        if out.hint.is_none() {
            if let Some(c) = p.hint.captures(text) {
                let whole = c.get(1).unwrap().as_str().trim();
                out.hint = Some(head(whole, MAX_HINT).trim().to_string());
            }
        }
        if out.at.is_none() {
            out.at = epoch(p, text).or_else(|| dated(p, text));
        }
        if out.after.is_none() {
            out.after = after(p, text, out.hint.as_deref());
        }
    }
    out.dated = out.hint.as_deref().is_some_and(|h| p.date.is_match(h));
    out.long_window = texts.iter().any(|t| p.long_window.is_match(t));
    out
}

/// What a reset hint lacks to name one instant, for reasonings: `a date` for
/// `resets 9:20am (UTC)`, `a UTC offset` for `2026-05-13 07:38`, and so on.
pub fn lacks(hint: &str) -> &'static str {
    let p = patterns();
    let (clock, zone, date) = (p.clock.is_match(hint), p.zone.is_match(hint), p.date.is_match(hint));
    match (date, clock, zone) {
        (true, true, false) => "a UTC offset",
        (true, false, _) => "a time of day",
        (false, true, true) => "a date",
        (false, true, false) => "a date and a UTC offset",
        _ => "a date, a time of day and a UTC offset (or an epoch)",
    }
}

fn epoch(p: &Patterns, text: &str) -> Option<Timestamp> {
    let c = p.epoch_pipe.captures(text).or_else(|| p.epoch_json.captures(text))?;
    let digits = c.get(1)?.as_str();
    let n: u64 = digits.parse().ok()?;
    // 10 digits are seconds, 13 are milliseconds.
    Some(if digits.len() >= 13 { n } else { n.checked_mul(1000)? })
}

fn dated(p: &Patterns, text: &str) -> Option<Timestamp> {
    let c = p.dated.captures(text)?;
    let when = c.get(1)?.as_str().replace([' ', 't'], "T");
    let zone = c.get(2)?.as_str();
    let zone = match zone.to_ascii_lowercase().as_str() {
        "z" | "utc" => "Z".to_string(),
        z if z.len() == 5 => format!("{}:{}", &z[..3], &z[3..]),
        z => z.to_string(),
    };
    let when = if when.len() == 16 { format!("{when}:00") } else { when };
    u64::try_from(crate::civil::rfc3339(&format!("{when}{zone}"))?).ok()
}

fn after(p: &Patterns, text: &str, hint: Option<&str>) -> Option<Duration> {
    if let Some(c) = p.after_json.captures(text) {
        let secs: u64 = c.get(1)?.as_str().parse().ok()?;
        return secs.checked_mul(NANOS_PER_SEC);
    }
    // "try again in 5 days 22 hours 11 minutes": only inside the hint.
    let hint = hint?;
    let c = p.relative.captures(hint)?;
    let mut total: u64 = 0;
    for u in p.unit.captures_iter(c.get(1)?.as_str()) {
        let n: u64 = u.get(1)?.as_str().parse().ok()?;
        let unit = u.get(2)?.as_str().to_ascii_lowercase();
        let secs = match unit.chars().next()? {
            'd' => 86_400,
            'h' => 3_600,
            'm' => 60,
            _ => 1,
        };
        total = total.checked_add(n.checked_mul(secs)?)?;
    }
    (total > 0).then(|| total.saturating_mul(NANOS_PER_SEC))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_time_with_zone_name_is_quoted_not_computed() {
        let r = find_reset(&["You've hit your session limit · resets 9:20am (UTC)"]);
        assert_eq!(r.hint.as_deref(), Some("resets 9:20am (UTC)"));
        assert_eq!(r.at, None);
        assert_eq!(r.after, None);
    }

    #[test]
    fn lacks_names_what_is_missing() {
        assert_eq!(lacks("resets 9:20am (UTC)"), "a date");
        assert_eq!(lacks("resets 3pm (Europe/Berlin)"), "a date");
        assert_eq!(lacks("reset at 2026-05-13 07:38:08"), "a UTC offset");
        assert_eq!(lacks("resets 9:20am"), "a date and a UTC offset");
        assert_eq!(lacks("resets Nov 3"), "a time of day");
        assert_eq!(lacks("try again later"), "a date, a time of day and a UTC offset (or an epoch)");
    }

    #[test]
    fn epoch_after_pipe_is_an_instant() {
        let r = find_reset(&["Claude AI usage limit reached|1749924000"]);
        assert_eq!(r.at, Some(1_749_924_000_000));
    }

    #[test]
    fn offset_timestamp_is_an_instant_but_bare_one_is_not() {
        let r = find_reset(&["Your limit will reset at 2026-05-13T07:38:08+02:00"]);
        assert_eq!(r.at, Some(1_778_650_688_000));
        let r = find_reset(&["Your limit will reset at 2026-05-13 07:38:08"]);
        assert_eq!(r.at, None);
        assert!(r.hint.unwrap().contains("2026-05-13 07:38:08"));
    }

    #[test]
    fn a_window_of_an_hour_or_more_is_long() {
        for text in [
            "Rate limit reached for gpt-3.5-turbo on tokens per day (TPD): Limit 200000",
            "Too many requests in 1 hour. Try again later.",
            "quotaId: GenerateRequestsPerDayPerProjectPerModel-FreeTier",
            "limit of 100 requests/day reached",
            "the hourly limit is spent",
        ] {
            assert!(find_reset(&[text]).long_window, "{text}");
        }
        for text in [
            "quotaId: GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
            "Rate limit reached on requests per min (RPM): Limit 3",
            "limit of 10 requests/second",
            "Too many requests. Try again later.",
            "the day's build of everyday tooling",
            "rpd and a day and daily",
        ] {
            assert!(!find_reset(&[text]).long_window, "{text}");
        }
    }

    #[test]
    fn a_hint_that_names_a_date_is_dated() {
        let r = find_reset(&["Please try again after Mon, 13 Jul 2026 19:14:55 GMT"]);
        assert!(r.dated && r.hint.as_deref() == Some("try again after Mon, 13 Jul 2026 19:14:55 GMT"), "{r:?}");
        assert!(find_reset(&["RateLimitError: Retry after 2024-06-27 03:57:26 +0000 UTC"]).dated);
        assert!(!find_reset(&["resets 9:20am (UTC)"]).dated, "a clock time alone names no date");
        assert!(!find_reset(&["Please try again after 20 seconds"]).dated);
        assert!(!find_reset(&["Mon, 13 Jul 2026: the server is down"]).dated, "a date outside a hint");
    }

    #[test]
    fn relative_reset() {
        let r =
            find_reset(&["You've hit your usage limit. Upgrade to Pro or try again in 5 days 22 hours 11 minutes."]);
        assert_eq!(r.after, Some((5 * 86_400 + 22 * 3_600 + 11 * 60) * NANOS_PER_SEC));
        let r = find_reset(&[
            r#"{"error":{"type":"usage_limit_reached","resets_at":1775317531,"resets_in_seconds":602705}}"#,
        ]);
        assert_eq!(r.at, Some(1_775_317_531_000));
        assert_eq!(r.after, Some(602_705 * NANOS_PER_SEC));
    }

    #[test]
    fn a_go_duration_is_a_relative_reset_and_a_fraction_counts_its_whole_units() {
        let after = |text: &str| find_reset(&[text]).after.map(|ns| ns / NANOS_PER_SEC);
        assert_eq!(after("Individual quota reached. Resets in 108h48m29s."), Some(108 * 3_600 + 48 * 60 + 29));
        assert_eq!(after("rate limited, retry after 1h0m0s"), Some(3_600));
        assert_eq!(after("quota exhausted, resets in 8h13m"), Some(8 * 3_600 + 13 * 60));
        assert_eq!(after("Please try again in 18.642s."), Some(18), "not 18 and 642 seconds");
        assert_eq!(after("try again in 2 hours, 5 minutes"), Some(2 * 3_600 + 5 * 60));
        assert_eq!(after("try again in 2 months"), None, "`m` of months is no minute");
    }

    #[test]
    fn a_stated_wait_is_a_relative_reset_and_prose_is_not() {
        let r = find_reset(&["Sorry, you have been rate-limited. Please wait 3 hours before trying again."]);
        assert_eq!(r.hint.as_deref(), Some("wait 3 hours before trying again."));
        assert_eq!(r.after, Some(3 * 3_600 * NANOS_PER_SEC));
        let r = find_reset(&["429: wait 30 seconds"]);
        assert_eq!(r.after, Some(30 * NANOS_PER_SEC));
        for prose in ["waiting for the lock on /tmp/x", "wait for 3 replicas to be ready", "await 5 tasks"] {
            let r = find_reset(&[prose]);
            assert_eq!((r.hint.as_deref(), r.after), (None, None), "{prose}");
        }
    }
}
