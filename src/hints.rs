//! Server hints: the structured retry advice an HTTP response carries in its
//! headers. Names match case-insensitively; the first occurrence of a name
//! wins; at most [`MAX_HEADERS`] headers are read.
//!
//! | header | meaning here |
//! | --- | --- |
//! | `x-should-retry: true\|false` | the server's word on retrying this request (Anthropic and OpenAI SDKs) |
//! | `retry-after-ms: <ms>` | wait this long (integer or decimal milliseconds); read before `retry-after` |
//! | `retry-after: <s>` | wait this long (integer or decimal seconds) |
//! | `retry-after: <HTTP-date>` | wait until then, read against the host's `now` (IMF-fixdate, RFC 850 or asctime, all GMT) |
//! | `anthropic-ratelimit-unified-reset: <epoch s>` | a subscription usage limit resets then (an RFC 3339 instant with an offset is read too) |
//! | `anthropic-ratelimit-unified-status: rejected` | the subscription usage limit is reached |
//!
//! A hint that is negative, out of range or unparseable is ignored and listed
//! in [`Hints::ignored`], so a decision can say so. Nothing here reads a clock.

use time::format_description::well_known::{Rfc2822, Rfc3339};
use time::{OffsetDateTime, PrimitiveDateTime};

use crate::classify::{head, MAX_HEADERS};
use crate::model::{Duration, Header, Timestamp, NANOS_PER_MILLI, NANOS_PER_SEC};

/// Header values longer than this are not parsed (and are cut in the quote).
pub const MAX_VALUE: usize = 128;

/// A wait the server asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// How long, from `now`. A date in the past gives 0.
    pub delay: Duration,
    /// The header as received, `name: value`, e.g. `retry-after: 7`.
    pub hint: String,
}

/// Everything the headers say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hints {
    /// `x-should-retry`, with the header as received.
    pub should_retry: Option<(bool, String)>,
    /// `retry-after-ms`, else `retry-after`.
    pub wait: Option<Wait>,
    /// `anthropic-ratelimit-unified-reset`: the usage-limit reset instant (ms) and the header.
    pub unified_reset: Option<(Timestamp, String)>,
    /// `anthropic-ratelimit-unified-status: rejected`, as received.
    pub unified_rejected: Option<String>,
    /// Hints present but not usable, each `name: value (why)`.
    pub ignored: Vec<String>,
}

impl Hints {
    /// `; ignored server hint ...` for a reasoning, or nothing.
    pub fn ignored_note(&self) -> String {
        if self.ignored.is_empty() {
            return String::new();
        }
        let plural = if self.ignored.len() == 1 { "" } else { "s" };
        format!("; ignored server hint{plural} {}", self.ignored.join(", "))
    }
}

/// `name: value` as received (value trimmed and cut to [`MAX_VALUE`] bytes).
fn quote(h: &Header) -> String {
    format!("{}: {}", head(h.name.trim(), 64), head(h.value.trim(), MAX_VALUE))
}

/// Reads the hints of `headers` against `now`.
pub fn read(headers: &[Header], now: Timestamp) -> Hints {
    let mut out = Hints::default();
    let mut ms_hint: Option<&Header> = None;
    let mut s_hint: Option<&Header> = None;
    let mut seen_should = false;
    let mut seen_reset = false;
    let mut seen_status = false;
    for h in headers.iter().take(MAX_HEADERS) {
        let name = h.name.trim();
        if name.eq_ignore_ascii_case("x-should-retry") && !seen_should {
            seen_should = true;
            match h.value.trim().to_ascii_lowercase().as_str() {
                "true" => out.should_retry = Some((true, quote(h))),
                "false" => out.should_retry = Some((false, quote(h))),
                _ => out.ignored.push(format!("`{}` (neither true nor false)", quote(h))),
            }
        } else if name.eq_ignore_ascii_case("retry-after-ms") && ms_hint.is_none() {
            ms_hint = Some(h);
        } else if name.eq_ignore_ascii_case("retry-after") && s_hint.is_none() {
            s_hint = Some(h);
        } else if name.eq_ignore_ascii_case("anthropic-ratelimit-unified-reset") && !seen_reset {
            seen_reset = true;
            match instant(h.value.trim()) {
                Some(at) => out.unified_reset = Some((at, quote(h))),
                None => out.ignored.push(format!("`{}` (not an epoch in seconds or an RFC 3339 instant)", quote(h))),
            }
        } else if name.eq_ignore_ascii_case("anthropic-ratelimit-unified-status") && !seen_status {
            seen_status = true;
            if h.value.trim().eq_ignore_ascii_case("rejected") {
                out.unified_rejected = Some(quote(h));
            }
        }
    }
    if let Some(h) = ms_hint {
        match decimal(h.value.trim(), NANOS_PER_MILLI) {
            Ok(delay) => out.wait = Some(Wait { delay, hint: quote(h) }),
            Err(why) => out.ignored.push(format!("`{}` ({why})", quote(h))),
        }
    }
    if let Some(h) = s_hint {
        let v = h.value.trim();
        let parsed = match decimal(v, NANOS_PER_SEC) {
            Ok(d) => Ok(d),
            Err(Bad::Negative) => Err("negative".to_string()),
            Err(Bad::Range) => Err("out of range".to_string()),
            Err(Bad::Syntax) => match http_date(v) {
                Some(at) => Ok(at.saturating_sub(now).saturating_mul(NANOS_PER_MILLI)),
                None => Err("neither seconds nor an HTTP date".to_string()),
            },
        };
        match parsed {
            // retry-after-ms, when usable, wins; retry-after is then not used.
            Ok(delay) if out.wait.is_none() => out.wait = Some(Wait { delay, hint: quote(h) }),
            Ok(_) => {}
            Err(why) => out.ignored.push(format!("`{}` ({why})", quote(h))),
        }
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bad {
    Negative,
    Range,
    Syntax,
}

impl std::fmt::Display for Bad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Bad::Negative => "negative",
            Bad::Range => "out of range",
            Bad::Syntax => "not a number",
        })
    }
}

/// A non-negative decimal (`7`, `1.5`, `.25`) times `unit` nanoseconds, in
/// integers: every host computes the same nanosecond. At most 12 integer
/// digits; fraction digits past the unit's precision are dropped.
fn decimal(v: &str, unit: u64) -> Result<Duration, Bad> {
    if v.len() > MAX_VALUE {
        return Err(Bad::Syntax);
    }
    if let Some(rest) = v.strip_prefix('-') {
        return if decimal(rest, unit).is_ok() { Err(Bad::Negative) } else { Err(Bad::Syntax) };
    }
    let (int, frac) = match v.split_once('.') {
        Some((i, f)) => (i, f),
        None => (v, ""),
    };
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(Bad::Syntax);
    }
    if int.len() > 12 {
        return Err(Bad::Range);
    }
    let whole: u64 = if int.is_empty() { 0 } else { int.parse().map_err(|_| Bad::Syntax)? };
    let mut total = whole.checked_mul(unit).ok_or(Bad::Range)?;
    let mut scale = unit;
    for d in frac.bytes() {
        scale /= 10;
        if scale == 0 {
            break;
        }
        total = total.checked_add((d - b'0') as u64 * scale).ok_or(Bad::Range)?;
    }
    Ok(total)
}

/// An HTTP date (RFC 9110 §5.6.7): IMF-fixdate, and the obsolete RFC 850 and
/// asctime forms, all in GMT. Milliseconds since the epoch.
pub fn http_date(v: &str) -> Option<Timestamp> {
    if v.len() > 64 {
        return None;
    }
    let dt = OffsetDateTime::parse(v, &Rfc2822).ok().or_else(|| rfc850(v)).or_else(|| {
        let asctime = time::format_description::parse(
            "[weekday repr:short] [month repr:short] [day padding:space] [hour]:[minute]:[second] [year]",
        )
        .ok()?;
        PrimitiveDateTime::parse(v, &asctime).ok().map(|p| p.assume_utc())
    })?;
    u64::try_from(dt.unix_timestamp_nanos() / 1_000_000).ok()
}

/// `Sunday, 06-Nov-94 08:49:37 GMT`: read as the RFC 2822 date `06 Nov 1994
/// 08:49:37 GMT` (the weekday is optional there). A two-digit year below 70 is
/// 20xx, else 19xx.
fn rfc850(v: &str) -> Option<OffsetDateTime> {
    let (_, rest) = v.split_once(", ")?;
    let (date, clock) = rest.split_once(' ')?;
    let mut it = date.split('-');
    let (day, month, yy) = (it.next()?, it.next()?, it.next()?);
    if it.next().is_some() || yy.len() != 2 || !yy.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let yy: u32 = yy.parse().ok()?;
    let year = if yy < 70 { 2000 + yy } else { 1900 + yy };
    OffsetDateTime::parse(&format!("{day} {month} {year} {clock}"), &Rfc2822).ok()
}

/// An instant: epoch seconds (10 digits or fewer), epoch milliseconds (13
/// digits), or RFC 3339 with an offset. Milliseconds since the epoch.
pub fn instant(v: &str) -> Option<Timestamp> {
    if v.is_empty() || v.len() > 64 {
        return None;
    }
    if v.bytes().all(|b| b.is_ascii_digit()) {
        let n: u64 = v.parse().ok()?;
        return match v.len() {
            1..=11 => n.checked_mul(1000),
            13 => Some(n),
            _ => None,
        };
    }
    let dt = OffsetDateTime::parse(v, &Rfc3339).ok()?;
    u64::try_from(dt.unix_timestamp_nanos() / 1_000_000).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(name: &str, value: &str) -> Header {
        Header { name: name.into(), value: value.into() }
    }

    const NOW: Timestamp = 1_790_000_000_000;

    #[test]
    fn retry_after_seconds_integer_and_decimal() {
        let h = read(&[hdr("Retry-After", "7")], NOW);
        assert_eq!(h.wait, Some(Wait { delay: 7 * NANOS_PER_SEC, hint: "Retry-After: 7".into() }));
        let h = read(&[hdr("retry-after", " 1.25 ")], NOW);
        assert_eq!(h.wait.unwrap().delay, 1_250_000_000);
    }

    #[test]
    fn retry_after_ms_wins_over_retry_after() {
        let h = read(&[hdr("retry-after", "7"), hdr("RETRY-AFTER-MS", "1500")], NOW);
        let w = h.wait.unwrap();
        assert_eq!(w.delay, 1_500 * NANOS_PER_MILLI);
        assert_eq!(w.hint, "RETRY-AFTER-MS: 1500");
        // An unusable ms hint falls back to retry-after and is reported.
        let h = read(&[hdr("retry-after", "7"), hdr("retry-after-ms", "soon")], NOW);
        assert_eq!(h.wait.as_ref().unwrap().delay, 7 * NANOS_PER_SEC);
        assert!(h.ignored_note().contains("retry-after-ms: soon"), "{:?}", h.ignored);
    }

    #[test]
    fn http_date_is_read_against_now() {
        // 1790000000 s = Sat, 21 Sep 2026 ... compute: now + 90 s as an IMF-fixdate.
        let then = OffsetDateTime::from_unix_timestamp((NOW / 1000 + 90) as i64).unwrap();
        let s = format!(
            "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
            &format!("{:?}", then.weekday())[..3],
            then.day(),
            &format!("{:?}", then.month())[..3],
            then.year(),
            then.hour(),
            then.minute(),
            then.second()
        );
        let h = read(&[hdr("Retry-After", &s)], NOW);
        assert_eq!(h.wait.unwrap().delay, 90 * NANOS_PER_SEC, "{s}");
        // A date in the past means now.
        let h = read(&[hdr("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT")], NOW);
        assert_eq!(h.wait.unwrap().delay, 0);
    }

    #[test]
    fn obsolete_http_date_forms() {
        let imf = http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(imf, 784_111_777_000);
        assert_eq!(http_date("Sunday, 06-Nov-94 08:49:37 GMT"), Some(imf));
        assert_eq!(http_date("Sun Nov  6 08:49:37 1994"), Some(imf));
        assert_eq!(http_date("tomorrow"), None);
    }

    #[test]
    fn negative_and_garbage_hints_are_ignored_and_reported() {
        let h = read(&[hdr("retry-after", "-5"), hdr("x-should-retry", "maybe")], NOW);
        assert_eq!(h.wait, None);
        assert_eq!(h.should_retry, None);
        assert_eq!(h.ignored.len(), 2);
        assert!(h.ignored_note().contains("retry-after: -5` (negative)"), "{}", h.ignored_note());
        let h = read(&[hdr("retry-after", "99999999999999999")], NOW);
        assert_eq!(h.wait, None);
        assert!(h.ignored[0].contains("out of range"));
    }

    #[test]
    fn should_retry_both_ways_first_wins() {
        let h = read(&[hdr("X-Should-Retry", "False"), hdr("x-should-retry", "true")], NOW);
        assert_eq!(h.should_retry, Some((false, "X-Should-Retry: False".into())));
        let h = read(&[hdr("x-should-retry", "true")], NOW);
        assert_eq!(h.should_retry.unwrap().0, true);
    }

    #[test]
    fn unified_reset_epoch_seconds_and_status() {
        let h = read(
            &[
                hdr("anthropic-ratelimit-unified-reset", "1790007200"),
                hdr("anthropic-ratelimit-unified-status", "rejected"),
            ],
            NOW,
        );
        assert_eq!(h.unified_reset.unwrap().0, 1_790_007_200_000);
        assert!(h.unified_rejected.is_some());
        let h = read(&[hdr("anthropic-ratelimit-unified-status", "allowed_warning")], NOW);
        assert!(h.unified_rejected.is_none());
    }

    #[test]
    fn decimal_is_exact_integer_arithmetic() {
        assert_eq!(decimal("0.001", NANOS_PER_SEC), Ok(1_000_000));
        assert_eq!(decimal("2.5", NANOS_PER_MILLI), Ok(2_500_000));
        assert_eq!(decimal("1.0000000009", NANOS_PER_SEC), Ok(NANOS_PER_SEC));
        assert_eq!(decimal(".", NANOS_PER_SEC), Err(Bad::Syntax));
        assert_eq!(decimal("1e3", NANOS_PER_SEC), Err(Bad::Syntax));
        assert_eq!(decimal("+3", NANOS_PER_SEC), Err(Bad::Syntax));
    }

    #[test]
    fn only_the_first_max_headers_are_read() {
        let mut hs: Vec<Header> = (0..MAX_HEADERS).map(|i| hdr(&format!("x-{i}"), "1")).collect();
        hs.push(hdr("retry-after", "7"));
        assert_eq!(read(&hs, NOW).wait, None);
    }
}
