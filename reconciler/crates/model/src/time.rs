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
}
