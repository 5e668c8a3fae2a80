//! The difference between Slurm's accounting and the fleet, as changes to
//! show and the minimal `sacctmgr` commands that make it so.
//!
//! Commands are ordered so each one finds what it refers to: new QOS first
//! (their `Preempt` lists once all exist), QOS changes, new accounts parents
//! first, account changes, deleted accounts children first, deleted QOS.
//! Only accounts and QOS gitfleet manages ([`Account::managed`],
//! [`Qos::managed`]) are ever deleted.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::state::{Account, Qos, SlurmState};

/// What a change does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// Created.
    Add,
    /// Some fields set.
    Modify,
    /// Deleted.
    Delete,
}

/// What a change is made to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    /// A QOS (a priority class).
    Qos,
    /// An account (a queue).
    Account,
    /// A partition (a pool, with `Mapping::partitions`).
    Partition,
}

/// One field's value in Slurm and in the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldChange {
    /// sacctmgr's name of the field.
    pub field: &'static str,
    /// Its value in Slurm (empty for a new object).
    pub current: String,
    /// Its value wanted (empty for a deleted object).
    pub desired: String,
}

/// One change to an account or QOS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Add, modify or delete.
    pub kind: ChangeKind,
    /// Account or QOS.
    pub object: ObjectKind,
    /// Its name.
    pub name: String,
    /// The fields that differ (all of them for an add).
    pub fields: Vec<FieldChange>,
    /// Slurm was changed by hand since gitfleet last applied (the fleet
    /// did not change what differs): the change reverts a hand edit.
    pub drift: bool,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (symbol, kind) = match self.kind {
            ChangeKind::Add => ('+', "add"),
            ChangeKind::Modify => ('~', "modify"),
            ChangeKind::Delete => ('-', "delete"),
        };
        let object = match self.object {
            ObjectKind::Qos => "qos",
            ObjectKind::Account => "account",
            ObjectKind::Partition => "partition",
        };
        write!(f, "{symbol} {kind} {object} {}", self.name)?;
        let mut sep = ": ";
        for c in &self.fields {
            match self.kind {
                ChangeKind::Add => write!(f, "{sep}{}={}", c.field, c.desired)?,
                ChangeKind::Modify => write!(
                    f,
                    "{sep}{} {} → {}",
                    c.field,
                    shown(&c.current),
                    shown(&c.desired)
                )?,
                ChangeKind::Delete => {}
            }
            sep = if self.kind == ChangeKind::Add {
                " "
            } else {
                ", "
            };
        }
        if self.drift {
            write!(f, " (drift: changed in Slurm, reverted)")?;
        }
        Ok(())
    }
}

fn shown(value: &str) -> &str {
    if value.is_empty() { "(none)" } else { value }
}

/// The changes and the sacctmgr commands (arguments after `sacctmgr -i`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diff {
    /// What changes, in the order carried out.
    pub changes: Vec<Change>,
    /// The commands, in order.
    pub commands: Vec<Vec<String>>,
    /// The partitions' `scontrol` commands (arguments after `scontrol`),
    /// run after the `sacctmgr` ones.
    pub scontrol: Vec<Vec<String>>,
}

impl Diff {
    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// Whether any change reverts a hand edit.
    pub fn has_drift(&self) -> bool {
        self.changes.iter().any(|c| c.drift)
    }
}

fn join(set: &BTreeSet<String>) -> String {
    set.iter().map(String::as_str).collect::<Vec<_>>().join(",")
}

fn tres_text(tres: &BTreeMap<String, u64>) -> String {
    tres.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn qos_fields(q: &Qos) -> Vec<(&'static str, String)> {
    vec![
        ("Priority", q.priority.to_string()),
        ("Preempt", join(&q.preempt)),
        ("PreemptMode", q.preempt_mode.clone()),
        ("GraceTime", q.grace_secs.to_string()),
        ("Description", q.description.clone()),
    ]
}

/// An account's fields gitfleet owns; the QOS list and default only when
/// the fleet has priority classes (`manage_qos`).
fn account_fields(a: &Account, manage_qos: bool) -> Vec<(&'static str, String)> {
    let mut fields = vec![
        ("Parent", a.parent.clone()),
        ("Fairshare", a.fairshare.clone()),
        ("GrpTRES", tres_text(&a.grp_tres)),
    ];
    if manage_qos {
        fields.push(("QOS", join(&a.qos)));
        fields.push(("DefaultQOS", a.default_qos.clone()));
    }
    fields.push(("Organization", a.organization.clone()));
    fields
}

fn field_changes(
    current: &[(&'static str, String)],
    desired: &[(&'static str, String)],
) -> Vec<FieldChange> {
    current
        .iter()
        .zip(desired)
        .filter(|(c, d)| c.1 != d.1)
        .map(|(c, d)| FieldChange {
            field: d.0,
            current: c.1.clone(),
            desired: d.1.clone(),
        })
        .collect()
}

/// Whether every differing field is one the fleet did not change since
/// `last` was applied (so Slurm changed).
fn is_drift(fields: &[FieldChange], last: Option<&[(&'static str, String)]>) -> bool {
    let Some(last) = last else { return false };
    !fields.is_empty()
        && fields.iter().all(|c| {
            last.iter()
                .any(|(name, value)| *name == c.field && *value == c.desired)
        })
}

/// `set` arguments for changed account fields (a TRES gitfleet no longer
/// limits is cleared with `-1`, a default QOS with `-1`).
fn account_set_args(current: &Account, desired: &Account, fields: &[FieldChange]) -> Vec<String> {
    let mut args = Vec::new();
    for c in fields {
        match c.field {
            "GrpTRES" => {
                let mut items: Vec<String> = desired
                    .grp_tres
                    .iter()
                    .filter(|(k, v)| current.grp_tres.get(*k) != Some(v))
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                items.extend(
                    current
                        .grp_tres
                        .keys()
                        .filter(|k| !desired.grp_tres.contains_key(*k))
                        .map(|k| format!("{k}=-1")),
                );
                items.sort();
                args.push(format!("GrpTRES={}", items.join(",")));
            }
            "DefaultQOS" if c.desired.is_empty() => args.push("DefaultQOS=-1".to_string()),
            "QOS" if c.desired.is_empty() => args.push("QOS=".to_string()),
            field => args.push(format!("{field}={}", c.desired)),
        }
    }
    args
}

/// The depth of `name` in `accounts` (top level 0), cycles cut.
fn depth(accounts: &BTreeMap<String, Account>, name: &str) -> usize {
    let mut depth = 0;
    let mut at = name;
    while let Some(a) = accounts.get(at) {
        if depth > accounts.len() {
            break;
        }
        depth += 1;
        at = &a.parent;
    }
    depth
}

/// What changes from `current` to `desired` on `cluster`. `last` is what
/// gitfleet applied last (if known): a difference the fleet did not make
/// is marked as drift.
pub fn diff(
    current: &SlurmState,
    desired: &SlurmState,
    last: Option<&SlurmState>,
    cluster: &str,
) -> Diff {
    let mut out = Diff::default();
    let s = |v: &str| v.to_string();
    let cluster_arg = format!("cluster={cluster}");

    // New QOS, then their Preempt lists, then changed QOS.
    let mut preempt_later = Vec::new();
    for (name, q) in &desired.qos {
        if current.qos.contains_key(name) {
            continue;
        }
        let fields = qos_fields(q);
        out.changes.push(Change {
            kind: ChangeKind::Add,
            object: ObjectKind::Qos,
            name: name.clone(),
            fields: added(&fields),
            drift: last.is_some_and(|l| l.qos.contains_key(name)),
        });
        out.commands.push(vec![
            s("add"),
            s("qos"),
            name.clone(),
            format!("Priority={}", q.priority),
            format!("PreemptMode={}", q.preempt_mode),
            format!("GraceTime={}", q.grace_secs),
            format!("Description={}", q.description),
        ]);
        if !q.preempt.is_empty() {
            preempt_later.push(vec![
                s("modify"),
                s("qos"),
                s("where"),
                format!("name={name}"),
                s("set"),
                format!("Preempt={}", join(&q.preempt)),
            ]);
        }
    }
    out.commands.extend(preempt_later);
    for (name, q) in &desired.qos {
        let Some(c) = current.qos.get(name) else {
            continue;
        };
        let fields = field_changes(&qos_fields(c), &qos_fields(q));
        if fields.is_empty() {
            continue;
        }
        let last_fields = last.and_then(|l| l.qos.get(name)).map(qos_fields);
        let mut command = vec![
            s("modify"),
            s("qos"),
            s("where"),
            format!("name={name}"),
            s("set"),
        ];
        command.extend(fields.iter().map(|f| match f.field {
            "Preempt" if f.desired.is_empty() => s("Preempt="),
            field => format!("{field}={}", f.desired),
        }));
        out.commands.push(command);
        out.changes.push(Change {
            kind: ChangeKind::Modify,
            object: ObjectKind::Qos,
            name: name.clone(),
            drift: is_drift(&fields, last_fields.as_deref()),
            fields,
        });
    }

    // New accounts, parents first.
    let manage_qos = !desired.qos.is_empty();
    let mut new: Vec<&Account> = desired
        .accounts
        .values()
        .filter(|a| !current.accounts.contains_key(&a.name))
        .collect();
    new.sort_by_key(|a| (depth(&desired.accounts, &a.name), a.name.clone()));
    for a in new {
        let fields = account_fields(a, manage_qos);
        out.changes.push(Change {
            kind: ChangeKind::Add,
            object: ObjectKind::Account,
            name: a.name.clone(),
            fields: added(&fields),
            drift: last.is_some_and(|l| l.accounts.contains_key(&a.name)),
        });
        let mut command = vec![s("add"), s("account"), a.name.clone(), cluster_arg.clone()];
        command.extend(
            fields
                .iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| format!("{k}={v}")),
        );
        command.push(format!("Description=gitfleet queue {}", a.name));
        out.commands.push(command);
    }
    for a in desired.accounts.values() {
        let Some(c) = current.accounts.get(&a.name) else {
            continue;
        };
        let fields = field_changes(
            &account_fields(c, manage_qos),
            &account_fields(a, manage_qos),
        );
        if fields.is_empty() {
            continue;
        }
        let last_fields = last
            .and_then(|l| l.accounts.get(&a.name))
            .map(|l| account_fields(l, manage_qos));
        let mut command = vec![
            s("modify"),
            s("account"),
            s("where"),
            format!("name={}", a.name),
            cluster_arg.clone(),
            s("set"),
        ];
        command.extend(account_set_args(c, a, &fields));
        out.commands.push(command);
        out.changes.push(Change {
            kind: ChangeKind::Modify,
            object: ObjectKind::Account,
            name: a.name.clone(),
            drift: is_drift(&fields, last_fields.as_deref()),
            fields,
        });
    }

    // Accounts gitfleet made that the fleet no longer has, children first.
    let mut gone: Vec<&Account> = current
        .accounts
        .values()
        .filter(|a| a.managed() && !desired.accounts.contains_key(&a.name))
        .collect();
    gone.sort_by_key(|a| {
        (
            std::cmp::Reverse(depth(&current.accounts, &a.name)),
            a.name.clone(),
        )
    });
    for a in gone {
        out.changes.push(deleted(ObjectKind::Account, &a.name));
        out.commands.push(vec![
            s("delete"),
            s("account"),
            s("where"),
            format!("name={}", a.name),
            cluster_arg.clone(),
        ]);
    }
    for q in current.qos.values() {
        if q.managed() && !desired.qos.contains_key(&q.name) {
            out.changes.push(deleted(ObjectKind::Qos, &q.name));
            out.commands.push(vec![
                s("delete"),
                s("qos"),
                s("where"),
                format!("name={}", q.name),
            ]);
        }
    }
    crate::partitions::diff(
        &current.partitions,
        &desired.partitions,
        last.map(|l| &l.partitions),
        &mut out,
    );
    // Show changes in the order of the commands' kinds: QOS adds and
    // changes, account adds and changes, deletions, then partitions.
    out.changes.sort_by_key(|c| match (c.kind, c.object) {
        (ChangeKind::Delete, ObjectKind::Account) => 2,
        (ChangeKind::Delete, ObjectKind::Qos) => 3,
        (_, ObjectKind::Qos) => 0,
        (_, ObjectKind::Account) => 1,
        (_, ObjectKind::Partition) => 4,
    });
    out
}

fn added(fields: &[(&'static str, String)]) -> Vec<FieldChange> {
    fields
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| FieldChange {
            field: k,
            current: String::new(),
            desired: v.clone(),
        })
        .collect()
}

fn deleted(object: ObjectKind, name: &str) -> Change {
    Change {
        kind: ChangeKind::Delete,
        object,
        name: name.to_string(),
        fields: Vec::new(),
        drift: false,
    }
}
