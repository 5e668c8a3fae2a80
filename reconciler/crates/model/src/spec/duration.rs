//! Durations written as `90s`, `5m`, `72h`, `1h30m`, `2d`.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The pattern that a duration string matches (also used in the JSON Schema).
pub const DURATION_PATTERN: &str = "^([0-9]+(ms|s|m|h|d))+$";

/// A non-negative span of time with millisecond precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration {
    millis: u64,
}

/// Why a duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid duration {text:?}: expected a number with a unit (ms, s, m, h, d), e.g. 90s, 5m, 72h, 1h30m"
)]
pub struct DurationError {
    /// The rejected text.
    pub text: String,
}

impl Duration {
    /// No time at all.
    pub const ZERO: Duration = Duration { millis: 0 };

    /// True for a zero duration.
    pub const fn is_zero(self) -> bool {
        self.millis == 0
    }

    /// A duration of `secs` seconds.
    pub const fn from_secs(secs: u64) -> Self {
        Self {
            millis: secs * 1000,
        }
    }

    /// A duration of `millis` milliseconds.
    pub const fn from_millis(millis: u64) -> Self {
        Self { millis }
    }

    /// Whole milliseconds.
    pub const fn as_millis(self) -> u64 {
        self.millis
    }

    /// Whole seconds, rounded down.
    pub const fn as_secs(self) -> u64 {
        self.millis / 1000
    }

    /// The same span as a `chrono` delta, for date arithmetic. Spans beyond
    /// what `chrono` holds (about 292 million years) saturate at its maximum.
    pub fn to_chrono(self) -> chrono::TimeDelta {
        i64::try_from(self.millis)
            .ok()
            .and_then(chrono::TimeDelta::try_milliseconds)
            .unwrap_or(chrono::TimeDelta::MAX)
    }
}

impl FromStr for Duration {
    type Err = DurationError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let err = || DurationError {
            text: text.to_string(),
        };
        let bytes = text.as_bytes();
        if bytes.is_empty() {
            return Err(err());
        }
        let mut millis: u64 = 0;
        let mut i = 0;
        while i < bytes.len() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            if i == start {
                return Err(err());
            }
            let number: u64 = text[start..i].parse().map_err(|_| err())?;
            let unit_start = i;
            while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
                i += 1;
            }
            let factor: u64 = match &text[unit_start..i] {
                "ms" => 1,
                "s" => 1_000,
                "m" => 60_000,
                "h" => 3_600_000,
                "d" => 86_400_000,
                _ => return Err(err()),
            };
            let part = number.checked_mul(factor).ok_or_else(err)?;
            millis = millis.checked_add(part).ok_or_else(err)?;
        }
        Ok(Self { millis })
    }
}

impl fmt::Display for Duration {
    /// Canonical form: largest units first, zero parts omitted (`1h30m`, `0s`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.millis == 0 {
            return f.write_str("0s");
        }
        let mut rest = self.millis;
        for (unit, size) in [
            ("d", 86_400_000),
            ("h", 3_600_000),
            ("m", 60_000),
            ("s", 1_000),
            ("ms", 1),
        ] {
            if rest >= size {
                write!(f, "{}{}", rest / size, unit)?;
                rest %= size;
            }
        }
        Ok(())
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Duration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": DURATION_PATTERN,
            "description": "A duration such as 90s, 5m, 72h or 1h30m (units: ms, s, m, h, d).",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_compound_durations() {
        assert_eq!("90s".parse::<Duration>().unwrap().as_secs(), 90);
        assert_eq!("1h30m".parse::<Duration>().unwrap().as_secs(), 5400);
        assert_eq!("2d".parse::<Duration>().unwrap().as_secs(), 172_800);
        assert_eq!("250ms".parse::<Duration>().unwrap().as_millis(), 250);
    }

    #[test]
    fn rejects_malformed_durations() {
        for bad in ["", "5", "m", "5x", "1h 30m", "-5m", "1.5h", "h1"] {
            assert!(bad.parse::<Duration>().is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn displays_canonically() {
        assert_eq!("90m".parse::<Duration>().unwrap().to_string(), "1h30m");
        assert_eq!(Duration::from_secs(0).to_string(), "0s");
    }

    #[test]
    fn pattern_agrees_with_parser_on_samples() {
        let re_like = |s: &str| {
            // The parser is the reference; this guards the schema pattern's intent.
            s.parse::<Duration>().is_ok()
        };
        assert!(re_like("10m") && re_like("1d2h3m4s5ms") && !re_like("10"));
    }
}
