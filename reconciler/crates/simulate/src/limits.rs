//! Declared time limits synthesised from true durations (`--limits`).

use model::spec::Duration;

/// How the replay declares jobs' `timeLimit`s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Limits {
    /// What the trace declares (none for Philly and Alibaba).
    #[default]
    Trace,
    /// The true duration.
    Exact,
    /// The true duration rounded up to the [`LADDER`].
    Ladder,
    /// The true duration × a seeded log-uniform factor in [1, 20], then the ladder.
    Noisy,
    /// No time limit.
    None,
}

/// The rungs, in hours: 15m, 1h, 4h, 12h, 24h, 72h, 168h, 720h, 2160h.
pub const LADDER: [u64; 9] = [
    15 * 60,
    3600,
    4 * 3600,
    12 * 3600,
    24 * 3600,
    72 * 3600,
    168 * 3600,
    720 * 3600,
    2160 * 3600,
];

/// The smallest rung at least `d`; past the last rung, `d` rounded up to
/// the hour.
pub fn ladder(d: Duration) -> Duration {
    let ms = d.as_millis();
    LADDER
        .iter()
        .map(|s| s * 1000)
        .find(|rung| *rung >= ms)
        .map_or_else(
            || Duration::from_millis(ms.div_ceil(3_600_000).saturating_mul(3_600_000)),
            Duration::from_millis,
        )
}

/// A factor in [1, 20], log-uniform, from `seed` and the job's index (the
/// same job gets the same factor whatever else the trace holds).
pub fn noise(seed: u64, job: u64) -> f64 {
    let bits = splitmix64(seed ^ splitmix64(job));
    // 53 random bits as a fraction in [0, 1).
    let u = (bits >> 11) as f64 / (1u64 << 53) as f64;
    (u * 20f64.ln()).exp()
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Limits {
    /// The limit declared for a job of true `duration`, index `job`,
    /// declaring `declared` in the trace.
    pub fn declare(
        self,
        duration: Duration,
        declared: Option<Duration>,
        seed: u64,
        job: u64,
    ) -> Option<Duration> {
        match self {
            Limits::Trace => declared,
            Limits::Exact => Some(duration),
            Limits::Ladder => Some(ladder(duration)),
            Limits::Noisy => {
                let noisy = duration.as_millis() as f64 * noise(seed, job);
                // At most 20 × a duration of at most 100 years: in range.
                Some(ladder(Duration::from_millis(noisy.ceil() as u64)))
            }
            Limits::None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ladder_rounds_up_to_the_next_rung() {
        let h = |n: u64| Duration::from_secs(n * 3600);
        assert_eq!(ladder(Duration::from_secs(1)), Duration::from_secs(900));
        assert_eq!(ladder(Duration::from_secs(900)), Duration::from_secs(900));
        assert_eq!(ladder(Duration::from_secs(901)), h(1));
        assert_eq!(ladder(h(13)), h(24));
        assert_eq!(ladder(h(2161)), h(2161));
        assert_eq!(ladder(Duration::from_millis(2160 * 3_600_000 + 1)), h(2161));
    }

    #[test]
    fn noise_is_seeded_and_within_bounds() {
        let factors: Vec<f64> = (0..1000).map(|j| noise(7, j)).collect();
        assert!(factors.iter().all(|f| (1.0..=20.0).contains(f)));
        assert!(factors.iter().any(|f| *f > 10.0) && factors.iter().any(|f| *f < 2.0));
        assert_eq!(noise(7, 3), noise(7, 3));
        assert_ne!(noise(7, 3), noise(8, 3));
    }
}
