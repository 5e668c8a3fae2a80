//! The fleet as Slurm accounting wants it: one account per queue, one QOS
//! per priority class (the mapping is documented in docs/slurm.md).

use std::collections::{BTreeMap, BTreeSet};

use model::spec::Fleet;

use crate::state::{
    Account, MANAGED_ORGANIZATION, MANAGED_QOS_PREFIX, PreemptMode, Qos, SlurmState,
};

/// Site choices the fleet does not say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// The account top-level queues hang under (`root`).
    pub root: String,
    /// GPU model → Slurm GRES type, for models whose type is not the
    /// model's name in lower case.
    pub gres_types: BTreeMap<String, String>,
    /// How preempted jobs end.
    pub preempt_mode: PreemptMode,
    /// Pools become partitions of their nodes (`--slurm-partitions`;
    /// [`crate::partitions`]).
    pub partitions: bool,
}

impl Default for Mapping {
    fn default() -> Self {
        Mapping {
            root: "root".to_string(),
            gres_types: BTreeMap::new(),
            preempt_mode: PreemptMode::Requeue,
            partitions: false,
        }
    }
}

impl Mapping {
    /// The GRES type of a GPU model.
    pub fn gres_type(&self, model: &str) -> String {
        self.gres_types
            .get(model)
            .cloned()
            .unwrap_or_else(|| model.to_ascii_lowercase())
    }

    /// The TRES name of a GPU model's GPUs (`gres/gpu:<type>`).
    pub fn tres(&self, model: &str) -> String {
        format!("gres/gpu:{}", self.gres_type(model))
    }
}

/// Why the fleet cannot be written to Slurm.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    /// A name Slurm would read as something else.
    #[error("{what} `{name}` cannot be a Slurm name (letters, digits, `-`, `_`, `.` only)")]
    BadName {
        /// What names it.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// The root account is also a queue.
    #[error("queue `{0}` has the name of the root account")]
    RootQueue(String),
}

pub(crate) fn check_name(what: &'static str, name: &str) -> Result<(), MapError> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(MapError::BadName {
            what,
            name: name.to_string(),
        })
    }
}

/// What Slurm's accounting should hold for `fleet`.
///
/// - Queue → account: parent (top-level queues under `mapping.root`),
///   `Fairshare` = weight, `GrpTRES=gres/gpu:<type>=limit` for every model
///   with a limit, every class's QOS allowed, the default class's QOS as
///   `DefaultQOS`. Guarantees have no Slurm equivalent: they are kept by
///   gitfleet's own plans only (docs/slurm.md).
/// - Priority class → QOS: `Priority` = value (negative values as 0),
///   `Preempt` = the preemptible classes of lower value, `PreemptMode`,
///   `GraceTime` = grace period.
pub fn desired(fleet: &Fleet, mapping: &Mapping) -> Result<SlurmState, MapError> {
    let mut state = SlurmState::default();
    for class in &fleet.priority_classes {
        check_name("priority class", class.name())?;
        let preempt: BTreeSet<String> = fleet
            .priority_classes
            .iter()
            .filter(|o| o.spec.preemptible && o.spec.value < class.spec.value)
            .map(|o| o.name().to_string())
            .collect();
        state.qos.insert(
            class.name().to_string(),
            Qos {
                name: class.name().to_string(),
                priority: u32::try_from(class.spec.value.max(0)).unwrap_or(0),
                preempt,
                preempt_mode: mapping.preempt_mode.as_str().to_string(),
                grace_secs: class.spec.grace_period.as_secs(),
                description: format!("{MANAGED_QOS_PREFIX} {}", class.name()),
            },
        );
    }
    let all_qos: BTreeSet<String> = state.qos.keys().cloned().collect();
    let default_qos = fleet
        .priority_classes
        .iter()
        .find(|c| c.spec.default)
        .map(|c| c.name().to_string())
        .unwrap_or_default();
    for queue in &fleet.queues {
        check_name("queue", queue.name())?;
        if queue.name() == mapping.root {
            return Err(MapError::RootQueue(queue.name().to_string()));
        }
        let mut grp_tres = BTreeMap::new();
        for quota in &queue.spec.quota {
            if let Some(limit) = quota.limit {
                let tres = mapping.tres(&quota.model);
                check_name("GPU model's GRES type", &mapping.gres_type(&quota.model))?;
                grp_tres.insert(tres, u64::from(limit));
            }
        }
        state.accounts.insert(
            queue.name().to_string(),
            Account {
                name: queue.name().to_string(),
                parent: queue
                    .spec
                    .parent
                    .clone()
                    .unwrap_or_else(|| mapping.root.clone()),
                fairshare: queue.spec.weight.to_string(),
                grp_tres,
                qos: all_qos.clone(),
                default_qos: default_qos.clone(),
                organization: MANAGED_ORGANIZATION.to_string(),
            },
        );
    }
    Ok(state)
}
