//! Dates: the proleptic Gregorian calendar and the three textual forms the
//! policy reads, each to milliseconds since the Unix epoch.
//!
//! - RFC 3339 (`2026-09-21T12:00:00Z`, `2026-09-21T14:00:00.250+02:00`):
//!   `anthropic-ratelimit-unified-reset` and reset hints in text.
//! - The HTTP date of RFC 9110 §5.6.7 (`retry-after`): IMF-fixdate (`Sun, 06
//!   Nov 1994 08:49:37 GMT`), and the obsolete RFC 850 (`Sunday, 06-Nov-94
//!   08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`) forms.
//! - `2026-09-21T12:00:00Z` written for reasonings.
//!
//! Hand-written rather than taken from the `time` crate (which read them up
//! to Backstop 0.3.0, and is the right library for dates anywhere else):
//! inside the component its parsers cost about 30 KB of the 1 MiB the
//! component may weigh, and these forms need about a hundred lines. `tests/civil.rs` checks every form
//! against `time` on random instants.

/// Days from 1970-01-01 to the given civil date (H. Hinnant's `days_from_civil`).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day counted from 1970-01-01 (H. Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// A date and time of day with its UTC offset, as written.
struct Stamp {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    millis: u32,
    offset_minutes: i64,
}

impl Stamp {
    /// Milliseconds since the epoch, if every field is in range.
    fn millis(&self) -> Option<i128> {
        let valid = (1..=12).contains(&self.month)
            && (1..=days_in_month(self.year, self.month)).contains(&self.day)
            && self.hour < 24
            && self.minute < 60
            && self.second < 60;
        if !valid {
            return None;
        }
        let days = i128::from(days_from_civil(self.year, self.month, self.day));
        let secs = days * 86_400 + i128::from(self.hour * 3600 + self.minute * 60 + self.second)
            - i128::from(self.offset_minutes) * 60;
        Some(secs * 1000 + i128::from(self.millis))
    }
}

/// Exactly `n` ASCII digits at the front of `s`, and the rest.
fn digits(s: &str, n: usize) -> Option<(u32, &str)> {
    let head = s.get(..n)?;
    if !head.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((head.parse().ok()?, &s[n..]))
}

/// `hh:mm:ss`, then the rest.
fn clock(s: &str) -> Option<(u32, u32, u32, &str)> {
    let (hour, s) = digits(s, 2)?;
    let (minute, s) = digits(s.strip_prefix(':')?, 2)?;
    let (second, s) = digits(s.strip_prefix(':')?, 2)?;
    Some((hour, minute, second, s))
}

/// An RFC 3339 date-time with its offset: `T` or `t` between date and time,
/// an optional fraction (read to the millisecond), `Z`, `z` or `±hh:mm`.
pub fn rfc3339(s: &str) -> Option<i128> {
    let (year, s) = digits(s, 4)?;
    let (month, s) = digits(s.strip_prefix('-')?, 2)?;
    let (day, s) = digits(s.strip_prefix('-')?, 2)?;
    let s = s.strip_prefix(['T', 't'])?;
    let (hour, minute, second, mut s) = clock(s)?;
    let mut millis = 0;
    if let Some(frac) = s.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        let ms = format!("{:0<3}", &frac[..n.min(3)]);
        millis = ms.parse().ok()?;
        s = &frac[n..];
    }
    let offset_minutes = match s {
        "Z" | "z" => 0,
        _ => {
            let sign = match s.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let (h, rest) = digits(&s[1..], 2)?;
            let (m, rest) = digits(rest.strip_prefix(':')?, 2)?;
            if !rest.is_empty() || h > 23 || m > 59 {
                return None;
            }
            sign * i64::from(h * 60 + m)
        }
    };
    let stamp = Stamp { year: i64::from(year), month, day, hour, minute, second, millis, offset_minutes };
    stamp.millis()
}

const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
const LONG_DAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

fn month_of(name: &str) -> Option<u32> {
    MONTHS.iter().position(|m| *m == name).map(|i| i as u32 + 1)
}

/// An HTTP date (RFC 9110 §5.6.7) in any of its three forms, in GMT (`UTC`
/// written in its place is read the same). The day name must be one, but
/// need not be the date's (as the `time` crate read it before).
pub fn http_date(s: &str) -> Option<i128> {
    let gmt;
    let s = match s.strip_suffix(" UTC") {
        Some(rest) => {
            gmt = format!("{rest} GMT");
            gmt.as_str()
        }
        None => s,
    };
    let (stamp, day_name) = imf_fixdate(s).or_else(|| rfc850(s)).or_else(|| asctime(s))?;
    (DAYS.contains(&day_name) || LONG_DAYS.contains(&day_name)).then_some(())?;
    stamp.millis()
}

/// `Sun, 06 Nov 1994 08:49:37 GMT`.
fn imf_fixdate(s: &str) -> Option<(Stamp, &str)> {
    let (day_name, rest) = s.split_once(", ")?;
    let (day, rest) = digits(rest, 2)?;
    let month = month_of(rest.strip_prefix(' ')?.get(..3)?)?;
    let (year, rest) = digits(rest.get(4..)?.strip_prefix(' ')?, 4)?;
    let (hour, minute, second, rest) = clock(rest.strip_prefix(' ')?)?;
    (rest == " GMT").then_some(())?;
    let stamp = Stamp { year: i64::from(year), month, day, hour, minute, second, millis: 0, offset_minutes: 0 };
    Some((stamp, day_name))
}

/// `Sunday, 06-Nov-94 08:49:37 GMT`: a two-digit year below 70 is 20xx, else 19xx.
fn rfc850(s: &str) -> Option<(Stamp, &str)> {
    let (day_name, rest) = s.split_once(", ")?;
    let (day, rest) = digits(rest, 2)?;
    let month = month_of(rest.strip_prefix('-')?.get(..3)?)?;
    let (yy, rest) = digits(rest.get(4..)?.strip_prefix('-')?, 2)?;
    let year = if yy < 70 { 2000 + yy } else { 1900 + yy };
    let (hour, minute, second, rest) = clock(rest.strip_prefix(' ')?)?;
    (rest == " GMT").then_some(())?;
    let stamp = Stamp { year: i64::from(year), month, day, hour, minute, second, millis: 0, offset_minutes: 0 };
    Some((stamp, day_name))
}

/// `Sun Nov  6 08:49:37 1994`: the day padded with a space.
fn asctime(s: &str) -> Option<(Stamp, &str)> {
    let day_name = s.get(..3)?;
    let month = month_of(s.get(3..)?.strip_prefix(' ')?.get(..3)?)?;
    let rest = s.get(7..)?.strip_prefix(' ')?;
    let (day, rest) = match rest.strip_prefix(' ') {
        Some(one) => digits(one, 1)?,
        None => digits(rest, 2)?,
    };
    let (hour, minute, second, rest) = clock(rest.strip_prefix(' ')?)?;
    let (year, rest) = digits(rest.strip_prefix(' ')?, 4)?;
    rest.is_empty().then_some(())?;
    let stamp = Stamp { year: i64::from(year), month, day, hour, minute, second, millis: 0, offset_minutes: 0 };
    Some((stamp, day_name))
}

/// An instant as `2026-09-21T12:00:00Z` (UTC, whole seconds); one past the
/// year 9999 as its milliseconds.
pub fn format_utc(ms: u64) -> String {
    let secs = (ms / 1000) as i64;
    let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
    if year > 9999 {
        return format!("{ms} ms after the epoch");
    }
    let t = secs.rem_euclid(86_400);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", t / 3600, t / 60 % 60, t % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calendar_round_trips() {
        for days in [-719_468, -1, 0, 1, 10_957, 11_016, 19_782, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn rfc3339_reads_offsets_and_fractions() {
        assert_eq!(rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(rfc3339("1970-01-01T02:00:00.250+02:00"), Some(250));
        assert_eq!(rfc3339("1970-01-01t00:00:01.123456789z"), Some(1123));
        assert_eq!(rfc3339("2024-02-29T00:00:00Z"), Some(1_709_164_800_000));
        for bad in [
            "2023-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:00:00",
            "2026-01-01 00:00:00Z",
            "2026-01-01T00:00:00.Z",
            "2026-01-01T00:00:00+0200",
        ] {
            assert_eq!(rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn http_dates_in_three_forms() {
        let imf = http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(imf, 784_111_777_000);
        assert_eq!(http_date("Sunday, 06-Nov-94 08:49:37 GMT"), Some(imf));
        assert_eq!(http_date("Sun Nov  6 08:49:37 1994"), Some(imf));
        assert_eq!(http_date("Sun, 06 Nov 1994 08:49:37 UTC"), Some(imf));
        assert_eq!(http_date("Sunday, 06-Nov-94 08:49:37 UTC"), Some(imf));
        assert_eq!(http_date("Mon, 06 Nov 1994 08:49:37 GMT"), Some(imf), "the day name is not checked");
        for bad in [
            "Foo, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 PST",
            "Sun, 31 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49 GMT",
            "tomorrow",
            "",
        ] {
            assert_eq!(http_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn instants_are_written_in_utc() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(784_111_777_999), "1994-11-06T08:49:37Z");
        assert_eq!(format_utc(u64::MAX), format!("{} ms after the epoch", u64::MAX));
    }
}
