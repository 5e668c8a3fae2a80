//! "Did you mean …?" hints for unknown references.

/// The candidate closest to `wrong`, when it is close enough to be a typo.
pub fn closest<'a>(wrong: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::levenshtein(wrong, c), c))
        .filter(|(d, c)| *d <= (c.len().max(wrong.len()) / 3).max(1))
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
    }
}
