//! Points in time and date arithmetic that cannot panic.

use crate::spec::Duration;

/// A point in time (UTC).
pub type Timestamp = chrono::DateTime<chrono::Utc>;

/// `t + d`, saturating at the latest time `chrono` can represent (a time
/// limit of `9999999999h` ends "never", not in a panic).
pub fn after(t: Timestamp, d: Duration) -> Timestamp {
    t.checked_add_signed(d.to_chrono())
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC)
}

/// Reading timestamps as `chrono` does (RFC 3339), with a fast path for the
/// form gitfleet and executors write (`2026-11-21T10:00:00Z`, with or
/// without a fraction): an observed state of a large fleet holds hundreds of
/// thousands. Anything else, valid or not, is parsed by `chrono`, so values
/// and messages are `chrono`'s.
pub mod de {
    use std::fmt;

    use chrono::{NaiveDate, NaiveDateTime, NaiveTime, Utc};
    use serde::de::{self, Deserializer, Visitor};

    use super::Timestamp;

    /// `#[serde(deserialize_with)]` for a [`Timestamp`].
    pub fn timestamp<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Timestamp, D::Error> {
        deserializer.deserialize_str(TimestampVisitor)
    }

    /// `#[serde(deserialize_with)]` for an `Option<Timestamp>` (with
    /// `default` for a missing field; `null` is `None`).
    pub fn optional<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Timestamp>, D::Error> {
        deserializer.deserialize_option(OptionalVisitor)
    }

    struct TimestampVisitor;

    impl Visitor<'_> for TimestampVisitor {
        type Value = Timestamp;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an RFC 3339 formatted date and time string")
        }

        fn visit_str<E: de::Error>(self, value: &str) -> Result<Timestamp, E> {
            if let Some(t) = utc_seconds(value) {
                return Ok(t);
            }
            value
                .parse::<chrono::DateTime<chrono::FixedOffset>>()
                .map(|t| t.with_timezone(&Utc))
                .map_err(E::custom)
        }
    }

    struct OptionalVisitor;

    impl<'de> Visitor<'de> for OptionalVisitor {
        type Value = Option<Timestamp>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an RFC 3339 formatted date and time string")
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            timestamp(d).map(Some)
        }
    }

    /// `YYYY-MM-DDTHH:MM:SSZ`, optionally with `.` and 1–9 digits before the
    /// `Z`; `None` for anything else (which `chrono` then reads).
    pub(crate) fn utc_seconds(text: &str) -> Option<Timestamp> {
        let b = text.as_bytes();
        if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' {
            return None;
        }
        if b[13] != b':' || b[16] != b':' || *b.last()? != b'Z' {
            return None;
        }
        let num = |range: std::ops::Range<usize>| -> Option<u32> {
            b[range].iter().try_fold(0u32, |n, &c| {
                c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
            })
        };
        let nanos = match &b[19..b.len() - 1] {
            [] => 0,
            [b'.', digits @ ..] if (1..=9).contains(&digits.len()) => {
                let n = num(20..b.len() - 1)?;
                n * 10u32.pow(9 - digits.len() as u32)
            }
            _ => return None,
        };
        let date = NaiveDate::from_ymd_opt(num(0..4)? as i32, num(5..7)?, num(8..10)?)?;
        let time = NaiveTime::from_hms_nano_opt(num(11..13)?, num(14..16)?, num(17..19)?, nanos)?;
        Some(NaiveDateTime::new(date, time).and_utc())
    }
}

/// Writing timestamps as `chrono`'s `Serialize` does (RFC 3339 in UTC,
/// `Z`, a fraction of 3, 6 or 9 digits only when there is one), without
/// `chrono`'s general formatter: the state's records, the audit and
/// `observed.json` hold hundreds of thousands. Years outside 0–9999 and
/// leap seconds are written by `chrono`.
pub mod ser {
    use chrono::{Datelike, Timelike};
    use serde::Serializer;

    use super::Timestamp;

    /// `#[serde(serialize_with)]` for a [`Timestamp`].
    pub fn timestamp<S: Serializer>(t: &Timestamp, serializer: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; 30];
        match rfc3339(t, &mut buf) {
            Some(text) => serializer.serialize_str(text),
            None => serde::Serialize::serialize(t, serializer),
        }
    }

    /// `#[serde(serialize_with)]` for an `Option<Timestamp>`.
    pub fn optional<S: Serializer>(
        t: &Option<Timestamp>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => serializer.serialize_some(&Fast(t)),
            None => serializer.serialize_none(),
        }
    }

    /// A timestamp serialized by [`timestamp`].
    struct Fast<'a>(&'a Timestamp);

    impl serde::Serialize for Fast<'_> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            timestamp(self.0, serializer)
        }
    }

    /// `t` as `chrono` serializes it, written into `buf`; `None` where the
    /// fast form does not apply.
    pub(crate) fn rfc3339<'b>(t: &Timestamp, buf: &'b mut [u8; 30]) -> Option<&'b str> {
        let year = u32::try_from(t.year()).ok().filter(|y| *y <= 9999)?;
        let nanos = t.nanosecond();
        if nanos >= 1_000_000_000 {
            return None;
        }
        let mut at = 0;
        let mut put = |n: u32, digits: u32, after: u8| {
            for i in (0..digits).rev() {
                buf[at] = b'0' + (n / 10u32.pow(i) % 10) as u8;
                at += 1;
            }
            buf[at] = after;
            at += 1;
        };
        put(year, 4, b'-');
        put(t.month(), 2, b'-');
        put(t.day(), 2, b'T');
        put(t.hour(), 2, b':');
        put(t.minute(), 2, b':');
        match nanos {
            0 => put(t.second(), 2, b'Z'),
            n => {
                put(t.second(), 2, b'.');
                let (value, digits) = if n % 1_000_000 == 0 {
                    (n / 1_000_000, 3)
                } else if n % 1_000 == 0 {
                    (n / 1_000, 6)
                } else {
                    (n, 9)
                };
                put(value, digits, b'Z');
            }
        }
        std::str::from_utf8(&buf[..at]).ok()
    }
}

/// `#[serde(with = "model::time::fast")]` for a [`Timestamp`]: read by
/// [`de::timestamp`], written by [`ser::timestamp`].
pub mod fast {
    pub use super::de::timestamp as deserialize;
    pub use super::ser::timestamp as serialize;

    /// `#[serde(with = "model::time::fast::option")]` for an
    /// `Option<Timestamp>`: read by [`de::optional`](super::de::optional),
    /// written by [`ser::optional`](super::ser::optional).
    pub mod option {
        pub use super::super::de::optional as deserialize;
        pub use super::super::ser::optional as serialize;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_adds_and_saturates() {
        let t: Timestamp = "2026-11-21T10:00:00Z".parse().unwrap();
        let ninety: Duration = "90s".parse().unwrap();
        assert_eq!(
            after(t, ninety),
            "2026-11-21T10:01:30Z".parse::<Timestamp>().unwrap()
        );
        let huge: Duration = "9999999999h".parse().unwrap();
        assert_eq!(after(t, huge), chrono::DateTime::<chrono::Utc>::MAX_UTC);
        assert_eq!(
            Duration::from_millis(u64::MAX).to_chrono(),
            chrono::TimeDelta::MAX
        );
    }

    #[test]
    fn fast_timestamps_equal_chrono_s() {
        let chrono = |t: &str| {
            t.parse::<chrono::DateTime<chrono::FixedOffset>>()
                .ok()
                .map(|t| t.with_timezone(&chrono::Utc))
        };
        for t in [
            "2026-11-21T10:00:00Z",
            "2026-02-28T23:59:59Z",
            "2024-02-29T00:00:00Z",
            "1970-01-01T00:00:00.5Z",
            "2026-11-21T10:00:00.123456789Z",
            "2026-11-21T10:00:00.000000001Z",
            "0001-01-01T00:00:00Z",
            "9999-12-31T23:59:59Z",
        ] {
            assert_eq!(de::utc_seconds(t), chrono(t), "{t}");
            assert!(de::utc_seconds(t).is_some(), "{t}");
        }
        // Declined, and left to chrono (valid or not).
        for t in [
            "2026-02-29T00:00:00Z",
            "2026-11-21T24:00:00Z",
            "2026-11-21T10:00:60Z",
            "2026-11-21T10:00:00+01:00",
            "2026-11-21t10:00:00z",
            "2026-11-21 10:00:00Z",
            "2026-11-21T10:00:00.Z",
            "2026-11-21T10:00:00.1234567890Z",
            "+2026-11-21T10:00:00Z",
            "2026-1-21T10:00:00Z",
            "",
        ] {
            assert_eq!(de::utc_seconds(t), None, "{t}");
        }
    }

    proptest::proptest! {
        #[test]
        fn fast_timestamps_agree_with_chrono(
            y in 0u32..10000, mo in 0u32..14, d in 0u32..33,
            h in 0u32..26, mi in 0u32..62, s in 0u32..62,
            frac in proptest::option::of("[0-9]{1,10}"),
        ) {
            let text = format!(
                "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{}Z",
                frac.map(|f| format!(".{f}")).unwrap_or_default()
            );
            let chrono = text
                .parse::<chrono::DateTime<chrono::FixedOffset>>()
                .ok()
                .map(|t| t.with_timezone(&chrono::Utc));
            if let Some(fast) = de::utc_seconds(&text) {
                proptest::prop_assert_eq!(Some(fast), chrono, "{}", text);
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn fast_serialization_agrees_with_chrono(
            secs in -62_135_596_800i64..253_402_300_800,
            nanos in proptest::prop_oneof![
                proptest::strategy::Just(0u32),
                proptest::strategy::Strategy::prop_map(0u32..1000, |m| m * 1_000_000),
                proptest::strategy::Strategy::prop_map(0u32..1_000_000, |u| u * 1_000),
                0u32..1_000_000_000,
            ],
        ) {
            let t = chrono::DateTime::from_timestamp(secs, nanos).unwrap();
            let fast = serde_json::to_string(&Fast(t)).unwrap();
            let slow = serde_json::to_string(&t).unwrap();
            proptest::prop_assert_eq!(fast, slow);
        }
    }

    /// A timestamp through [`ser::timestamp`] and [`ser::optional`].
    #[derive(serde::Serialize)]
    struct Fast(#[serde(serialize_with = "ser::timestamp")] Timestamp);

    #[derive(serde::Serialize)]
    struct FastOption(#[serde(serialize_with = "ser::optional")] Option<Timestamp>);

    #[test]
    fn fast_serialization_of_edges_equals_chrono_s() {
        for t in [
            chrono::DateTime::<chrono::Utc>::MIN_UTC,
            chrono::DateTime::<chrono::Utc>::MAX_UTC,
            chrono::DateTime::from_timestamp(0, 0).unwrap(),
            chrono::DateTime::from_timestamp(-1, 999_999_999).unwrap(),
            chrono::DateTime::from_timestamp(1_700_000_039, 1_500_000_000).unwrap(),
            chrono::DateTime::from_timestamp(253_402_300_799, 123).unwrap(),
            chrono::DateTime::from_timestamp(253_402_300_800, 0).unwrap(),
            "2026-11-21T10:00:00.5Z".parse().unwrap(),
        ] {
            assert_eq!(
                serde_json::to_string(&Fast(t)).unwrap(),
                serde_json::to_string(&t).unwrap(),
                "{t:?}"
            );
            assert_eq!(
                serde_json::to_string(&FastOption(Some(t))).unwrap(),
                serde_json::to_string(&Some(t)).unwrap()
            );
        }
        assert_eq!(serde_json::to_string(&FastOption(None)).unwrap(), "null");
        let mut buf = [0u8; 30];
        let t: Timestamp = "2026-11-21T10:00:00.123Z".parse().unwrap();
        assert_eq!(ser::rfc3339(&t, &mut buf), Some("2026-11-21T10:00:00.123Z"));
    }
}
