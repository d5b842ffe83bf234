//! Server hints: the structured retry advice an HTTP response carries in its
//! headers, read once, by `classify`, into [`ServerHint`]s. Names match
//! case-insensitively; the first occurrence of a name wins; at most
//! [`MAX_HEADERS`] headers are read. Nothing here reads a clock: an HTTP date
//! stays an instant, resolved against the host's `now` by the deciders.
//!
//! | header | hint |
//! | --- | --- |
//! | `x-should-retry: true\|false` | `should-retry` / `should-not-retry` (Anthropic and OpenAI SDKs) |
//! | `retry-after-ms: <ms>` | `retry-after`, wait this long (integer or decimal ms); read before `retry-after` |
//! | `retry-after: <s>` | `retry-after`, wait this long (integer or decimal seconds) |
//! | `retry-after: <HTTP-date>` | `retry-after`, wait until then (IMF-fixdate, RFC 850 or asctime; `GMT`, or `UTC` written in its place) |
//! | `x-ratelimit-remaining: 0` with `x-ratelimit-reset: <epoch s>` | `rate-limit-reset` at that instant (GitHub's primary limit); a reset below 10^9 is read as seconds from now |
//! | `anthropic-ratelimit-unified-reset: <epoch s>` | `usage-limit-reset` at that instant (an RFC 3339 instant with an offset is read too) |
//! | `anthropic-ratelimit-unified-status: rejected` | `usage-limit-rejected` |
//!
//! A hint too large to represent saturates at [`MAX_WAIT`] (about 104 days):
//! it is longer than any ceiling, never dropped. A negative or unparseable hint is not used and
//! is listed, with why, among the ignored hints.

use crate::model::{Classification, Duration, Header, HintKind, ServerHint, Timestamp, NANOS_PER_MILLI, NANOS_PER_SEC};
use crate::text::head;

/// At most this many headers are read; the rest are ignored.
pub const MAX_HEADERS: usize = 256;

/// Header values longer than this are not parsed (and are cut in the quote).
pub const MAX_VALUE: usize = 128;

/// The longest wait a hint gives: 2^53 - 1 ns (about 104 days), the largest
/// duration that JSON carries exactly. A longer or unrepresentable hint
/// saturates here, longer than every ceiling of the configuration.
pub const MAX_WAIT: Duration = (1 << 53) - 1;

/// Epoch seconds start here; a smaller `x-ratelimit-reset` is a delta.
const EPOCH_FLOOR: u64 = 1_000_000_000;

/// The hints of a set of headers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Read {
    /// Usable hints, in header order.
    pub hints: Vec<ServerHint>,
    /// Hints present but not usable, each `` `name: value` (why) ``.
    pub ignored: Vec<String>,
}

/// `name: value` as received (value trimmed and cut to [`MAX_VALUE`] bytes).
fn quote(h: &Header) -> String {
    format!("{}: {}", head(h.name.trim(), 64), head(h.value.trim(), MAX_VALUE))
}

/// The first header of each name this module reads.
#[derive(Default)]
struct Named<'a> {
    should: Option<&'a Header>,
    ms: Option<&'a Header>,
    secs: Option<&'a Header>,
    remaining: Option<&'a Header>,
    reset: Option<&'a Header>,
    unified_reset: Option<&'a Header>,
    unified_status: Option<&'a Header>,
}

/// Where a header stands in the list, to keep the hints in header order.
fn position(headers: &[Header], header: &str) -> usize {
    let name = header.split(':').next().unwrap_or("").trim();
    headers.iter().position(|h| h.name.trim().eq_ignore_ascii_case(name)).unwrap_or(usize::MAX)
}

fn named(headers: &[Header]) -> Named<'_> {
    let mut n = Named::default();
    for h in headers.iter().take(MAX_HEADERS) {
        let slot = match h.name.trim().to_ascii_lowercase().as_str() {
            "x-should-retry" => &mut n.should,
            "retry-after-ms" => &mut n.ms,
            "retry-after" => &mut n.secs,
            "x-ratelimit-remaining" => &mut n.remaining,
            "x-ratelimit-reset" => &mut n.reset,
            "anthropic-ratelimit-unified-reset" => &mut n.unified_reset,
            "anthropic-ratelimit-unified-status" => &mut n.unified_status,
            _ => continue,
        };
        slot.get_or_insert(h);
    }
    n
}

fn hint(kind: HintKind, header: String, after: Option<Duration>, at: Option<Timestamp>) -> ServerHint {
    ServerHint { kind, header, after, at }
}

/// Reads the hints of `headers`.
pub fn read(headers: &[Header]) -> Read {
    let n = named(headers);
    let mut out = Read::default();
    if let Some(h) = n.should {
        match h.value.trim().to_ascii_lowercase().as_str() {
            "true" => out.hints.push(hint(HintKind::ShouldRetry, quote(h), None, None)),
            "false" => out.hints.push(hint(HintKind::ShouldNotRetry, quote(h), None, None)),
            _ => out.ignored.push(format!("`{}` (neither true nor false)", quote(h))),
        }
    }
    wait(&n, &mut out);
    if let Some(r) = n.remaining.filter(|r| r.value.trim() == "0") {
        let reset = n.reset.map(|h| (h, h.value.trim().parse::<u64>()));
        let (header, after, at) = match reset {
            Some((h, Ok(v))) if v >= EPOCH_FLOOR => (format!("{}; {}", quote(r), quote(h)), None, v.checked_mul(1000)),
            Some((h, Ok(v))) => {
                (format!("{}; {}", quote(r), quote(h)), Some(v.saturating_mul(NANOS_PER_SEC).min(MAX_WAIT)), None)
            }
            Some((h, Err(_))) => {
                out.ignored.push(format!("`{}` (not epoch seconds)", quote(h)));
                (quote(r), None, None)
            }
            None => (quote(r), None, None),
        };
        out.hints.push(hint(HintKind::RateLimitReset, header, after, at));
    }
    if let Some(h) = n.unified_reset {
        match instant(h.value.trim()) {
            Some(at) => out.hints.push(hint(HintKind::UsageLimitReset, quote(h), None, Some(at))),
            None => out.ignored.push(format!("`{}` (not an epoch in seconds or an RFC 3339 instant)", quote(h))),
        }
    }
    if let Some(h) = n.unified_status.filter(|h| h.value.trim().eq_ignore_ascii_case("rejected")) {
        out.hints.push(hint(HintKind::UsageLimitRejected, quote(h), None, None));
    }
    out.hints.sort_by_key(|h| position(headers, &h.header));
    out
}

// The hints of a classification, as the deciders read them.

/// `; ignored server hint ...` for a reasoning, or nothing.
pub fn ignored_note(c: &Classification) -> String {
    match c.ignored_hints.len() {
        0 => String::new(),
        1 => format!("; ignored server hint {}", c.ignored_hints[0]),
        _ => format!("; ignored server hints {}", c.ignored_hints.join(", ")),
    }
}

/// The headers of the hints of `kinds` present in `c`, `; `-joined.
pub fn quotes(c: &Classification, kinds: &[HintKind]) -> Option<String> {
    let q: Vec<&str> = c.hints.iter().filter(|h| kinds.contains(&h.kind)).map(|h| h.header.as_str()).collect();
    (!q.is_empty()).then(|| q.join("; "))
}

/// The wait a server asks for, resolved against `now`: the `retry-after`
/// hint, else a spent rate-limit window's reset. An instant in the past is 0.
pub fn server_wait(c: &Classification, now: Timestamp) -> Option<(Duration, &ServerHint)> {
    let h = c.hint(HintKind::RetryAfter).or_else(|| c.hint(HintKind::RateLimitReset))?;
    let wait = match (h.after, h.at) {
        (Some(after), _) => after,
        (None, Some(at)) => at.saturating_sub(now).saturating_mul(NANOS_PER_MILLI).min(MAX_WAIT),
        (None, None) => return None,
    };
    Some((wait, h))
}

/// `retry-after-ms`, else `retry-after`: one `retry-after` hint.
fn wait(n: &Named, out: &mut Read) {
    if let Some(h) = n.ms {
        match decimal(h.value.trim(), NANOS_PER_MILLI) {
            Ok(after) => {
                out.hints.push(hint(HintKind::RetryAfter, quote(h), Some(after), None));
                return;
            }
            Err(why) => out.ignored.push(format!("`{}` ({why})", quote(h))),
        }
    }
    if let Some(h) = n.secs {
        let v = h.value.trim();
        match decimal(v, NANOS_PER_SEC) {
            Ok(after) => out.hints.push(hint(HintKind::RetryAfter, quote(h), Some(after), None)),
            Err(Bad::Negative) => out.ignored.push(format!("`{}` (negative)", quote(h))),
            Err(Bad::Syntax) => match http_date(v) {
                Some(at) => out.hints.push(hint(HintKind::RetryAfter, quote(h), None, Some(at))),
                None => out.ignored.push(format!("`{}` (neither seconds nor an HTTP date)", quote(h))),
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bad {
    Negative,
    Syntax,
}

impl std::fmt::Display for Bad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Bad::Negative => "negative",
            Bad::Syntax => "not a number",
        })
    }
}

/// A non-negative decimal (`7`, `1.5`, `.25`) times `unit` nanoseconds, in
/// integers: every host computes the same nanosecond. A value too large
/// saturates at [`MAX_WAIT`]; fraction digits past the unit's precision are
/// dropped.
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
    let whole: u64 = if int.is_empty() { 0 } else { int.parse().unwrap_or(u64::MAX) };
    let mut total = whole.saturating_mul(unit);
    let mut scale = unit;
    for d in frac.bytes() {
        scale /= 10;
        if scale == 0 {
            break;
        }
        total = total.saturating_add((d - b'0') as u64 * scale);
    }
    Ok(total.min(MAX_WAIT))
}

/// An HTTP date (RFC 9110 §5.6.7): IMF-fixdate, and the obsolete RFC 850 and
/// asctime forms, all in GMT; `UTC` written in place of `GMT` is read the
/// same. Milliseconds since the epoch.
pub fn http_date(v: &str) -> Option<Timestamp> {
    if v.len() > 64 {
        return None;
    }
    u64::try_from(crate::civil::http_date(v)?).ok()
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
    u64::try_from(crate::civil::rfc3339(v)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(name: &str, value: &str) -> Header {
        Header { name: name.into(), value: value.into() }
    }

    fn one(headers: &[Header]) -> ServerHint {
        let r = read(headers);
        assert_eq!(r.hints.len(), 1, "{r:?}");
        r.hints[0].clone()
    }

    #[test]
    fn retry_after_seconds_integer_and_decimal() {
        let h = one(&[hdr("Retry-After", "7")]);
        assert_eq!(
            (h.kind, h.after, h.header.as_str()),
            (HintKind::RetryAfter, Some(7 * NANOS_PER_SEC), "Retry-After: 7")
        );
        assert_eq!(one(&[hdr("retry-after", " 1.25 ")]).after, Some(1_250_000_000));
    }

    #[test]
    fn retry_after_ms_wins_over_retry_after() {
        let h = one(&[hdr("retry-after", "7"), hdr("RETRY-AFTER-MS", "1500")]);
        assert_eq!((h.after, h.header.as_str()), (Some(1_500 * NANOS_PER_MILLI), "RETRY-AFTER-MS: 1500"));
        // An unusable ms hint falls back to retry-after and is reported.
        let r = read(&[hdr("retry-after", "7"), hdr("retry-after-ms", "soon")]);
        assert_eq!(r.hints[0].after, Some(7 * NANOS_PER_SEC));
        assert!(r.ignored[0].contains("retry-after-ms: soon"), "{:?}", r.ignored);
    }

    #[test]
    fn http_date_is_an_instant_in_gmt_or_utc() {
        let h = one(&[hdr("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT")]);
        assert_eq!((h.after, h.at), (None, Some(1_445_412_480_000)));
        assert_eq!(one(&[hdr("Retry-After", "Wed, 21 Oct 2015 07:28:00 UTC")]).at, Some(1_445_412_480_000));
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
        let r = read(&[hdr("retry-after", "-5"), hdr("x-should-retry", "maybe")]);
        assert!(r.hints.is_empty());
        assert_eq!(r.ignored.len(), 2);
        assert!(r.ignored.iter().any(|i| i.contains("retry-after: -5` (negative)")), "{:?}", r.ignored);
    }

    #[test]
    fn a_hint_too_large_saturates() {
        assert_eq!(one(&[hdr("retry-after", "99999999999999999")]).after, Some(MAX_WAIT));
        assert_eq!(one(&[hdr("retry-after-ms", "9007199254741")]).after, Some(MAX_WAIT));
    }

    #[test]
    fn should_retry_both_ways_first_wins() {
        assert_eq!(
            one(&[hdr("X-Should-Retry", "False"), hdr("x-should-retry", "true")]).kind,
            HintKind::ShouldNotRetry
        );
        assert_eq!(one(&[hdr("x-should-retry", "true")]).kind, HintKind::ShouldRetry);
    }

    #[test]
    fn unified_reset_epoch_seconds_and_status() {
        let r = read(&[
            hdr("anthropic-ratelimit-unified-reset", "1790007200"),
            hdr("anthropic-ratelimit-unified-status", "rejected"),
        ]);
        let kinds: Vec<HintKind> = r.hints.iter().map(|h| h.kind).collect();
        assert_eq!(kinds, vec![HintKind::UsageLimitReset, HintKind::UsageLimitRejected]);
        // In header order.
        let r = read(&[
            hdr("anthropic-ratelimit-unified-status", "rejected"),
            hdr("anthropic-ratelimit-unified-reset", "1790007200"),
        ]);
        assert_eq!(r.hints[0].kind, HintKind::UsageLimitRejected);
        assert_eq!(r.hints[1].at, Some(1_790_007_200_000));
        assert!(read(&[hdr("anthropic-ratelimit-unified-status", "allowed_warning")]).hints.is_empty());
    }

    #[test]
    fn github_primary_rate_limit() {
        let h = one(&[hdr("x-ratelimit-remaining", "0"), hdr("x-ratelimit-reset", "1790000600")]);
        assert_eq!((h.kind, h.at), (HintKind::RateLimitReset, Some(1_790_000_600_000)));
        assert_eq!(h.header, "x-ratelimit-remaining: 0; x-ratelimit-reset: 1790000600");
        assert_eq!(
            one(&[hdr("x-ratelimit-remaining", "0"), hdr("x-ratelimit-reset", "30")]).after,
            Some(30 * NANOS_PER_SEC)
        );
        // Requests left: no hint.
        assert!(read(&[hdr("x-ratelimit-remaining", "12"), hdr("x-ratelimit-reset", "1790000600")]).hints.is_empty());
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
        assert!(read(&hs).hints.is_empty());
    }
}
