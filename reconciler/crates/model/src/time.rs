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
}
