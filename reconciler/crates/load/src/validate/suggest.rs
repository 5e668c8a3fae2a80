//! "Did you mean …?" hints for unknown references.

/// The candidate closest to `wrong`, when it is close enough to be a typo.
pub fn closest<'a>(wrong: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        // Optimal string alignment: a swap of two letters is one edit. Up to
        // one edit per four characters: `A100-SXM-40GB` is no typo of `H200-SXM-141GB`.
        .map(|c| (strsim::osa_distance(wrong, c), c))
        .filter(|(d, c)| {
            *d <= (c.len().max(wrong.len()) / 4).max(1) && *d < c.len().min(wrong.len())
        })
        .min()
        .map(|(_, c)| c)
}

/// `" (did you mean \"x\"?)"` or nothing.
pub fn hint<'a>(wrong: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(wrong, candidates)
        .map(|c| format!(" (did you mean {c:?}?)"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn suggests_near_names_only() {
        assert_eq!(
            closest("reserch", ["research", "production"]),
            Some("research")
        );
        assert_eq!(closest("zzz", ["research", "production"]), None);
        assert_eq!(closest("Z", ["X"]), None);
        assert_eq!(closest("hihg", ["high", "low"]), Some("high"));
        assert_eq!(closest("job", ["Job", "Queue"]), Some("Job"));
        assert_eq!(closest("H200-SXM-141GB", ["A100-SXM-40GB"]), None);
        assert_eq!(
            closest("A100-SXM-80GB", ["A100-SXM-40GB", "H100-SXM-80GB"]),
            Some("A100-SXM-40GB")
        );
    }
}
