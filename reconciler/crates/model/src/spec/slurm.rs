//! A Job's `slurm:` section: the `sbatch` options gitfleet does not own
//! (docs/slurm.md), passed by the Slurm executor in scheduler mode. Other
//! executors ignore it. What gitfleet owns (nodes, tasks, GPUs, time,
//! account, QOS, the job's name and comment) cannot be set here:
//! [`owned_option`] says why for each such name.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A Slurm memory size: a whole number with an optional `K`, `M`
/// (Slurm's default unit), `G` or `T` suffix.
pub const SIZE_PATTERN: &str = r"^[0-9]{1,12}[KMGT]?$";
/// A feature expression: node features (letters, digits, `_.+-`) joined
/// by `&` (and) or `|` (or).
pub const CONSTRAINT_PATTERN: &str = r"^[A-Za-z0-9_.+-]+([&|][A-Za-z0-9_.+-]+)*$";
/// An absolute path without control characters; Slurm's filename
/// patterns (`%j`, `%x`, `%N`, `%t`, …) are expanded by Slurm.
pub const PATH_PATTERN: &str = r"^/[^\x00-\x1f\x7f]*$";
/// The most CPUs per task Slurm takes (a 16-bit count).
pub const MAX_CPUS_PER_TASK: u32 = 65_534;

/// The `sbatch` options of the job's Slurm job that gitfleet leaves to it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SlurmSpec {
    /// CPUs of each task, i.e. of each replica (`--cpus-per-task`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_CPUS_PER_TASK))]
    pub cpus_per_task: Option<u32>,
    /// Memory per node (`--mem`, e.g. `64G`; `0`: all of it). At most one
    /// of `mem`, `memPerCpu` and `memPerGpu`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = SIZE_PATTERN))]
    pub mem: Option<String>,
    /// Memory per allocated CPU (`--mem-per-cpu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = SIZE_PATTERN))]
    pub mem_per_cpu: Option<String>,
    /// Memory per allocated GPU (`--mem-per-gpu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = SIZE_PATTERN))]
    pub mem_per_gpu: Option<String>,
    /// Node features the planned nodes must have (`--constraint`, e.g.
    /// `ib&nvme`); a node without them leaves the job pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = CONSTRAINT_PATTERN), length(max = 1024))]
    pub constraint: Option<String>,
    /// The batch script's standard output (`--output`; default: none kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = PATH_PATTERN), length(max = 4096))]
    pub output: Option<String>,
    /// Its standard error (`--error`; default: with the output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = PATH_PATTERN), length(max = 4096))]
    pub error: Option<String>,
}

impl SlurmSpec {
    /// The memory options given, as `(field, sbatch option)`.
    pub fn memory(&self) -> Vec<(&'static str, &'static str, &str)> {
        [
            ("mem", "--mem", &self.mem),
            ("memPerCpu", "--mem-per-cpu", &self.mem_per_cpu),
            ("memPerGpu", "--mem-per-gpu", &self.mem_per_gpu),
        ]
        .into_iter()
        .filter_map(|(field, option, v)| v.as_deref().map(|v| (field, option, v)))
        .collect()
    }
}

/// Why `field` (a key of `spec.slurm`) cannot be set, when it names an
/// `sbatch` option gitfleet sets itself.
pub fn owned_option(field: &str) -> Option<&'static str> {
    Some(match field {
        "partition" => {
            "gitfleet places the gang on the planned nodes (--nodelist) in the default partition"
        }
        "nodes" | "nodelist" | "exclude" | "ntasks" | "ntasksPerNode" => {
            "gitfleet places the gang: --nodes, --ntasks, --ntasks-per-node and --nodelist come from its plan (spec.replicas)"
        }
        "gres" | "gpus" | "gpusPerNode" | "gpusPerTask" | "gpuBind" => {
            "gitfleet allocates the GPUs: --gres comes from its plan (spec.gpusPerReplica, spec.gpu)"
        }
        "time" => "--time comes from spec.timeLimit",
        "account" => "--account is the job's queue (spec.queue)",
        "qos" => "--qos is the job's priority class (spec.priorityClass)",
        "jobName" | "comment" => "gitfleet finds its Slurm jobs by --job-name and --comment",
        "hold" | "wrap" | "dependency" | "begin" | "requeue" => {
            "gitfleet decides when the job starts and what it runs (spec.command)"
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_options_have_a_reason_others_do_not() {
        for owned in [
            "nodelist",
            "partition",
            "gres",
            "time",
            "account",
            "qos",
            "comment",
        ] {
            assert!(owned_option(owned).is_some(), "{owned}");
        }
        for free in ["cpusPerTask", "mem", "output", "constraint", "cpusPerTsk"] {
            assert_eq!(owned_option(free), None, "{free}");
        }
    }

    #[test]
    fn memory_options_in_field_order() {
        let spec = SlurmSpec {
            mem_per_gpu: Some("64G".into()),
            mem: Some("0".into()),
            ..SlurmSpec::default()
        };
        assert_eq!(
            spec.memory(),
            [("mem", "--mem", "0"), ("memPerGpu", "--mem-per-gpu", "64G")]
        );
    }
}
