//! NVML product names → the model names NodePools use.
//!
//! Pools name models `<GPU>-<form factor>-<memory>` (`H100-SXM-80GB`,
//! `A100-SXM4-80GB`, as in `examples/fleet`). NVML names the same parts
//! differently across products and driver versions ("NVIDIA H100 80GB HBM3",
//! "NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-32GB"), so a table maps them.
//! A name not in the table falls back to a mechanical form (prefix `NVIDIA `
//! or `Tesla ` dropped, spaces to `-`, upper case) and is flagged so that the
//! caller can suggest a `--model-map` entry. `docs/inventory.md` lists the table.

use std::collections::BTreeMap;

/// The built-in table: NVML name → pool model name.
pub const BUILTIN: &[(&str, &str)] = &[
    // Hopper
    ("NVIDIA H100 80GB HBM3", "H100-SXM-80GB"),
    ("NVIDIA H100 PCIe", "H100-PCIE-80GB"),
    ("NVIDIA H100 NVL", "H100-NVL-94GB"),
    ("NVIDIA H800", "H800-SXM-80GB"),
    ("NVIDIA H800 PCIe", "H800-PCIE-80GB"),
    ("NVIDIA H200", "H200-SXM-141GB"),
    ("NVIDIA H200 NVL", "H200-NVL-141GB"),
    ("NVIDIA H20", "H20-SXM-96GB"),
    ("NVIDIA GH200 480GB", "GH200-96GB"),
    // Blackwell
    ("NVIDIA B200", "B200-SXM-180GB"),
    ("NVIDIA GB200", "GB200-186GB"),
    // Ampere
    ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
    ("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"),
    ("NVIDIA A100 80GB PCIe", "A100-PCIE-80GB"),
    ("NVIDIA A100-PCIE-40GB", "A100-PCIE-40GB"),
    ("A100-SXM4-80GB", "A100-SXM4-80GB"),
    ("A100-SXM4-40GB", "A100-SXM4-40GB"),
    ("A100-SXM-80GB", "A100-SXM4-80GB"),
    ("A100-PCIE-40GB", "A100-PCIE-40GB"),
    ("NVIDIA A800-SXM4-80GB", "A800-SXM4-80GB"),
    ("NVIDIA A30", "A30-24GB"),
    ("NVIDIA A10", "A10-24GB"),
    ("NVIDIA A10G", "A10G-24GB"),
    // Ada
    ("NVIDIA L40S", "L40S-48GB"),
    ("NVIDIA L40", "L40-48GB"),
    ("NVIDIA L4", "L4-24GB"),
    // Volta, Turing
    ("Tesla V100-SXM2-32GB", "V100-SXM2-32GB"),
    ("Tesla V100-SXM2-16GB", "V100-SXM2-16GB"),
    ("Tesla V100-PCIE-32GB", "V100-PCIE-32GB"),
    ("Tesla V100-PCIE-16GB", "V100-PCIE-16GB"),
    ("Tesla T4", "T4-16GB"),
];

/// The result of mapping one NVML name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapped {
    /// The pool model name.
    pub model: String,
    /// False when neither the override file nor the built-in table knew the
    /// name and the mechanical fallback was used.
    pub known: bool,
}

/// NVML name → model name: the built-in table plus overrides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelMap {
    overrides: BTreeMap<String, String>,
}

/// A `--model-map` file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {message}")]
pub struct ModelMapError {
    /// The file.
    pub file: String,
    /// What is wrong with it.
    pub message: String,
}

impl ModelMap {
    /// The built-in table only.
    pub fn builtin() -> Self {
        Self::default()
    }

    /// The built-in table with `overrides` (NVML name → model) taking precedence.
    pub fn with_overrides(overrides: BTreeMap<String, String>) -> Self {
        let overrides = overrides
            .into_iter()
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        ModelMap { overrides }
    }

    /// Parses a `--model-map` file: a YAML (or JSON) mapping from NVML name
    /// to model name, e.g. `"NVIDIA H100 80GB HBM3": H100-80G`.
    pub fn parse(file: &str, text: &str) -> Result<Self, ModelMapError> {
        let err = |message: String| ModelMapError {
            file: file.to_string(),
            message,
        };
        let raw: BTreeMap<String, String> = if text.trim().is_empty() {
            BTreeMap::new()
        } else {
            serde_saphyr::from_str(text).map_err(|e| {
                err(format!(
                    "expected a mapping from NVML name to model name, like \
                     `\"NVIDIA H100 80GB HBM3\": H100-SXM-80GB` ({e})"
                ))
            })?
        };
        if let Some((name, _)) = raw.iter().find(|(_, model)| model.trim().is_empty()) {
            return Err(err(format!("{name:?}: the model name is empty")));
        }
        Ok(Self::with_overrides(raw))
    }

    /// Maps an NVML product name to a pool model name.
    pub fn map(&self, nvml_name: &str) -> Mapped {
        let name = nvml_name.trim();
        let found = lookup(
            self.overrides.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            name,
        )
        .or_else(|| lookup(BUILTIN.iter().copied(), name));
        match found {
            Some(model) => Mapped {
                model: model.to_string(),
                known: true,
            },
            None => Mapped {
                model: fallback(name),
                known: false,
            },
        }
    }
}

/// Exact match first, then a case-insensitive one.
fn lookup<'a>(
    table: impl Iterator<Item = (&'a str, &'a str)> + Clone,
    name: &str,
) -> Option<&'a str> {
    table
        .clone()
        .find(|(k, _)| *k == name)
        .or_else(|| {
            table
                .into_iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
        })
        .map(|(_, v)| v)
}

/// `NVIDIA RTX 6000 Ada Generation` → `RTX-6000-ADA-GENERATION`.
fn fallback(name: &str) -> String {
    let stripped = ["NVIDIA ", "Tesla ", "Quadro "]
        .iter()
        .find_map(|p| name.strip_prefix(p))
        .unwrap_or(name);
    let words: Vec<&str> = stripped.split_whitespace().collect();
    let model = words.join("-").to_ascii_uppercase();
    if model.is_empty() {
        "UNKNOWN".to_string()
    } else {
        model
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_names_match_the_example_fleet() {
        let map = ModelMap::builtin();
        assert_eq!(map.map("NVIDIA H100 80GB HBM3").model, "H100-SXM-80GB");
        assert_eq!(map.map("NVIDIA A100-SXM4-80GB").model, "A100-SXM4-80GB");
        assert_eq!(map.map("A100-SXM4-80GB").model, "A100-SXM4-80GB");
        assert!(map.map("NVIDIA H100 80GB HBM3").known);
    }

    #[test]
    fn lookup_trims_and_ignores_case() {
        let map = ModelMap::builtin();
        let m = map.map("  nvidia h100 80gb hbm3 ");
        assert_eq!(m.model, "H100-SXM-80GB");
        assert!(m.known);
    }

    #[test]
    fn unknown_names_fall_back_and_are_flagged() {
        let map = ModelMap::builtin();
        let m = map.map("NVIDIA RTX 6000 Ada Generation");
        assert_eq!(m.model, "RTX-6000-ADA-GENERATION");
        assert!(!m.known);
        assert_eq!(map.map("").model, "UNKNOWN");
    }

    #[test]
    fn overrides_win_over_the_table() {
        let map = ModelMap::parse(
            "map.yaml",
            "\"NVIDIA H100 80GB HBM3\": H100-80G\n\"NVIDIA RTX 6000 Ada Generation\": RTX6000ADA\n",
        )
        .unwrap();
        assert_eq!(map.map("NVIDIA H100 80GB HBM3").model, "H100-80G");
        assert_eq!(
            map.map("NVIDIA RTX 6000 Ada Generation").model,
            "RTX6000ADA"
        );
        assert!(map.map("NVIDIA RTX 6000 Ada Generation").known);
        assert_eq!(map.map("NVIDIA A100-SXM4-80GB").model, "A100-SXM4-80GB");
    }

    #[test]
    fn bad_override_files_name_the_file() {
        let err = ModelMap::parse("map.yaml", "- a\n- b\n").unwrap_err();
        assert!(
            err.to_string().starts_with("map.yaml: expected a mapping"),
            "{err}"
        );
        let err = ModelMap::parse("map.yaml", "\"NVIDIA L4\": \"\"\n").unwrap_err();
        assert!(err.to_string().contains("model name is empty"), "{err}");
        assert_eq!(
            ModelMap::parse("map.yaml", "").unwrap(),
            ModelMap::builtin()
        );
    }
}
