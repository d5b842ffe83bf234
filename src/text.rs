//! Text helpers for reasonings and records: cutting text on character
//! boundaries, durations and instants for people, plurals. No policy here.

use crate::model::{Timestamp, NANOS_PER_MILLI, NANOS_PER_SEC};

const SEC: u64 = NANOS_PER_SEC;
const MIN: u64 = 60 * SEC;
const HOUR: u64 = 60 * MIN;
const DAY: u64 = 24 * HOUR;

/// The head of `s` of at most `max` bytes, cut at a character boundary.
pub fn head(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The tail of `s` of at most `max` bytes, cut at a character boundary.
pub fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// A duration for people: `300s`, `5min`, `2h`, `7d`, `1500ms`.
pub fn human(ns: u64) -> String {
    if ns == 0 {
        return "0s".to_string();
    }
    if ns.is_multiple_of(DAY) {
        format!("{}d", ns / DAY)
    } else if ns.is_multiple_of(HOUR) {
        format!("{}h", ns / HOUR)
    } else if ns.is_multiple_of(MIN) {
        format!("{}min", ns / MIN)
    } else if ns.is_multiple_of(SEC) {
        format!("{}s", ns / SEC)
    } else if ns >= SEC {
        format!("{}.{:03}s", ns / SEC, (ns % SEC) / NANOS_PER_MILLI)
    } else if ns.is_multiple_of(NANOS_PER_MILLI) {
        format!("{}ms", ns / NANOS_PER_MILLI)
    } else {
        format!("{ns}ns")
    }
}

/// An instant as `2026-09-21T12:00:00Z` (UTC, whole seconds), for reasonings.
pub fn format_utc(ms: Timestamp) -> String {
    crate::civil::format_utc(ms)
}

/// `1 attempt`, `2 attempts`: the count and the word, plural unless the count is 1.
pub fn count(n: u64, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations() {
        assert_eq!(human(300 * SEC), "5min");
        assert_eq!(human(10 * SEC), "10s");
        assert_eq!(human(1_500 * NANOS_PER_MILLI), "1.500s");
        assert_eq!(human(7_336_847_483), "7.336s");
        assert_eq!(human(250 * NANOS_PER_MILLI), "250ms");
        assert_eq!(human(2 * HOUR), "2h");
    }

    #[test]
    fn utc_formatting() {
        assert_eq!(format_utc(1_778_650_688_000), "2026-05-13T05:38:08Z");
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert!(format_utc(u64::MAX).contains("ms after the epoch"));
    }

    #[test]
    fn counts_and_cuts() {
        assert_eq!(count(1, "attempt"), "1 attempt");
        assert_eq!(count(3, "attempt"), "3 attempts");
        assert_eq!(head("héllo", 2), "h");
        assert_eq!(tail("héllo", 4), "llo");
    }
}
