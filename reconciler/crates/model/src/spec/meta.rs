//! Fields shared by every document: `apiVersion`, `kind`, `metadata`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The only `apiVersion` gitfleet reads; documents with another one are ignored.
pub const API_VERSION: &str = "gitfleet/v1";

/// The pattern of a DNS-1123 label (used for every `metadata.name`).
pub const DNS_LABEL_PATTERN: &str = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$";

/// Name, labels and annotations of a document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    /// Unique per kind; a DNS-1123 label (lowercase letters, digits, `-`, at most 63).
    #[schemars(regex(pattern = DNS_LABEL_PATTERN), length(max = 63))]
    pub name: String,
    /// Free-form labels; Policies can match on them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Free-form annotations (e.g. `gitfleet/sim-duration` on a Job).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Whether `name` is a DNS-1123 label.
pub fn is_dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    let ok_inner = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-';
    let ok_edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.iter().all(ok_inner)
        && bytes.first().is_some_and(ok_edge)
        && bytes.last().is_some_and(ok_edge)
}

#[cfg(test)]
mod tests {
    use super::is_dns_label;

    #[test]
    fn dns_labels() {
        for ok in ["a", "nlp", "h100-train-0", &"a".repeat(63)] {
            assert!(is_dns_label(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad}");
        }
    }
}
