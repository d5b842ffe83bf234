//! `src/civil.rs` reads and writes dates by hand (the component's size); here
//! every form is checked against the `time` crate on random instants and
//! offsets, and on near misses that both must refuse.

use backstop::civil;
use proptest::prelude::*;
use time::format_description::well_known::{Rfc2822, Rfc3339};
use time::{OffsetDateTime, UtcOffset};

fn ms(dt: OffsetDateTime) -> i128 {
    dt.unix_timestamp_nanos() / 1_000_000
}

/// An instant from 1970 to 2199, to the nanosecond.
fn instant() -> impl Strategy<Value = OffsetDateTime> {
    (0i64..7_258_118_400, 0u32..1_000_000_000)
        .prop_map(|(s, n)| OffsetDateTime::from_unix_timestamp(s).unwrap().replace_nanosecond(n).unwrap())
}

fn offset() -> impl Strategy<Value = UtcOffset> {
    (-23i8..=23, 0i8..60).prop_map(|(h, m)| UtcOffset::from_hms(h, if h < 0 { -m } else { m }, 0).unwrap())
}

const DAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn rfc3339_agrees_with_time(t in instant(), off in offset()) {
        let text = t.to_offset(off).format(&Rfc3339).unwrap();
        let expected = ms(OffsetDateTime::parse(&text, &Rfc3339).unwrap());
        prop_assert_eq!(civil::rfc3339(&text), Some(expected), "{}", text);
    }

    #[test]
    fn the_three_http_date_forms_agree_with_time(t in instant()) {
        let t = t.replace_nanosecond(0).unwrap();
        let day = DAYS[t.weekday().number_days_from_monday() as usize];
        let month = MONTHS[u8::from(t.month()) as usize - 1];
        let clock = format!("{:02}:{:02}:{:02}", t.hour(), t.minute(), t.second());
        let imf = format!("{}, {:02} {month} {} {clock} GMT", &day[..3], t.day(), t.year());
        prop_assert_eq!(civil::http_date(&imf), Some(ms(OffsetDateTime::parse(&imf, &Rfc2822).unwrap())), "{}", imf);
        prop_assert_eq!(civil::http_date(&imf.replace(" GMT", " UTC")), Some(ms(t)));
        let asctime = format!("{} {month} {:>2} {clock} {}", &day[..3], t.day(), t.year());
        prop_assert_eq!(civil::http_date(&asctime), Some(ms(t)), "{}", asctime);
        if (1970..2070).contains(&t.year()) {
            let rfc850 = format!("{day}, {:02}-{month}-{:02} {clock} GMT", t.day(), t.year() % 100);
            prop_assert_eq!(civil::http_date(&rfc850), Some(ms(t)), "{}", rfc850);
        }
    }

    #[test]
    fn instants_are_written_as_time_writes_them(t in instant()) {
        let t = t.replace_nanosecond(0).unwrap();
        let written = civil::format_utc(ms(t) as u64);
        prop_assert_eq!(written.clone(), t.format(&Rfc3339).unwrap(), "{}", written);
    }

    #[test]
    fn any_text_is_read_without_panicking(s in "\\PC{0,40}") {
        let _ = (civil::rfc3339(&s), civil::http_date(&s));
    }
}

#[test]
fn near_misses_are_refused_by_both() {
    for text in [
        "2023-02-29T00:00:00Z",
        "2026-04-31T00:00:00Z",
        "2026-01-01T24:00:00Z",
        "2026-01-01T00:60:00Z",
        "2026-01-01T00:00:00",
        "2026-01-01T00:00:00+24:00",
    ] {
        assert!(OffsetDateTime::parse(text, &Rfc3339).is_err(), "time reads {text}");
        assert_eq!(civil::rfc3339(text), None, "{text}");
    }
    for text in [
        "Foo, 06 Nov 1994 08:49:37 GMT",
        "Sun, 31 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:49:37 GMT",
        "Sun, 06 Foo 1994 08:49:37 GMT",
    ] {
        assert!(OffsetDateTime::parse(text, &Rfc2822).is_err(), "time reads {text}");
        assert_eq!(civil::http_date(text), None, "{text}");
    }
    // Neither checks that the day name is the date's.
    let wrong_day = "Mon, 06 Nov 1994 08:49:37 GMT";
    assert_eq!(civil::http_date(wrong_day), Some(ms(OffsetDateTime::parse(wrong_day, &Rfc2822).unwrap())));
}
