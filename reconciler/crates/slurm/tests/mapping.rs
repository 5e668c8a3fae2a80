//! The pure parts on the example fleet and on random states: the mapping,
//! the diff's exact commands, drift, and that applying a diff converges.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use gitfleet_slurm::{Account, ChangeKind, Mapping, Qos, SlurmState, desired, diff};
use load::{SourceFile, load_fleet};
use model::spec::Fleet;
use proptest::prelude::*;

fn example() -> Fleet {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../examples/fleet");
    let files: Vec<SourceFile> = ["queues.yaml", "priority-classes.yaml", "pools.yaml"]
        .iter()
        .map(|f| SourceFile::new(*f, std::fs::read(format!("{dir}/{f}")).unwrap()))
        .collect();
    let loaded = load_fleet(&files);
    assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
    loaded.fleet
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn example_fleet_maps_to_accounts_and_qos() {
    let state = desired(&example(), &Mapping::default()).unwrap();
    assert_eq!(state.accounts.len(), 9);
    let org = &state.accounts["org"];
    assert_eq!(org.parent, "root");
    assert_eq!(org.grp_tres["gres/gpu:h100-sxm-80gb"], 832);
    let nlp = &state.accounts["nlp"];
    assert_eq!(
        (nlp.parent.as_str(), nlp.fairshare.as_str()),
        ("research", "50")
    );
    assert_eq!(nlp.grp_tres.len(), 1);
    assert_eq!(nlp.grp_tres["gres/gpu:h100-sxm-80gb"], 320);
    assert_eq!(nlp.qos, set(&["critical", "high", "low", "normal"]));
    assert_eq!(nlp.default_qos, "normal");
    assert!(nlp.managed());
    // Non-preemptible critical preempts every lower class; nothing preempts it.
    assert_eq!(
        state.qos["critical"].preempt,
        set(&["high", "low", "normal"])
    );
    assert_eq!(state.qos["high"].preempt, set(&["low", "normal"]));
    assert!(state.qos["low"].preempt.is_empty());
    assert_eq!(state.qos["high"].grace_secs, 300);
    assert_eq!(state.qos["critical"].grace_secs, 0);
    assert_eq!(state.qos["critical"].priority, 1000);
    assert_eq!(state.qos["high"].preempt_mode, "requeue");
    assert!(state.qos.values().all(Qos::managed));
}

#[test]
fn gres_types_can_be_named() {
    let mut mapping = Mapping::default();
    mapping
        .gres_types
        .insert("H100-SXM-80GB".into(), "h100".into());
    let state = desired(&example(), &mapping).unwrap();
    assert_eq!(state.accounts["nlp"].grp_tres["gres/gpu:h100"], 320);
}

#[test]
fn first_apply_orders_commands_so_references_exist() {
    let state = desired(&example(), &Mapping::default()).unwrap();
    let d = diff(&SlurmState::default(), &state, None, "c1");
    let heads: Vec<String> = d
        .commands
        .iter()
        .map(|c| format!("{} {} {}", c[0], c[1], c[2]))
        .collect();
    // QOS first, Preempt lists once all exist, then accounts parents first.
    let pos = |s: &str| heads.iter().position(|h| h == s).unwrap();
    assert!(pos("add qos low") < pos("modify qos where"));
    assert!(pos("modify qos where") < pos("add account org"));
    assert!(pos("add account org") < pos("add account research"));
    assert!(pos("add account research") < pos("add account nlp"));
    assert_eq!(d.commands.len(), 4 + 3 + 9);
    let nlp = &d.commands[pos("add account nlp")];
    assert_eq!(
        nlp[3..],
        [
            "cluster=c1",
            "Parent=research",
            "Fairshare=50",
            "GrpTRES=gres/gpu:h100-sxm-80gb=320",
            "QOS=critical,high,low,normal",
            "DefaultQOS=normal",
            "Organization=gitfleet",
            "Description=gitfleet queue nlp",
        ]
    );
    assert!(!d.has_drift());
}

#[test]
fn a_quota_change_is_one_modify_and_not_drift() {
    let fleet = example();
    let before = desired(&fleet, &Mapping::default()).unwrap();
    let mut after = before.clone();
    after
        .accounts
        .get_mut("nlp")
        .unwrap()
        .grp_tres
        .insert("gres/gpu:h100-sxm-80gb".into(), 300);
    let d = diff(&before, &after, Some(&before), "c1");
    assert_eq!(
        d.commands,
        [vec![
            "modify",
            "account",
            "where",
            "name=nlp",
            "cluster=c1",
            "set",
            "GrpTRES=gres/gpu:h100-sxm-80gb=300"
        ]]
    );
    assert_eq!(d.changes.len(), 1);
    assert!(!d.changes[0].drift);
    assert_eq!(
        d.changes[0].to_string(),
        "~ modify account nlp: GrpTRES gres/gpu:h100-sxm-80gb=320 → gres/gpu:h100-sxm-80gb=300"
    );
}

#[test]
fn a_hand_edit_is_drift_and_reverted() {
    let applied = desired(&example(), &Mapping::default()).unwrap();
    let mut slurm = applied.clone();
    slurm.accounts.get_mut("vision").unwrap().fairshare = "99".into();
    slurm.qos.get_mut("low").unwrap().grace_secs = 0;
    let d = diff(&slurm, &applied, Some(&applied), "c1");
    assert_eq!(d.changes.len(), 2);
    assert!(d.changes.iter().all(|c| c.drift), "{:?}", d.changes);
    assert!(d.commands.contains(&vec![
        "modify".to_string(),
        "qos".into(),
        "where".into(),
        "name=low".into(),
        "set".into(),
        "GraceTime=300".into()
    ]));
    assert!(
        d.changes[1]
            .to_string()
            .ends_with("(drift: changed in Slurm, reverted)")
    );
}

#[test]
fn removed_limits_are_cleared_and_only_managed_objects_deleted() {
    let wanted = desired(&example(), &Mapping::default()).unwrap();
    let mut slurm = wanted.clone();
    slurm
        .accounts
        .get_mut("nlp")
        .unwrap()
        .grp_tres
        .insert("gres/gpu:a100-sxm4-80gb".into(), 4);
    let mut stale = slurm.accounts["nlp"].clone();
    stale.name = "old-team".into();
    stale.parent = "old-dept".into();
    let mut dept = stale.clone();
    dept.name = "old-dept".into();
    dept.parent = "root".into();
    let mut foreign = stale.clone();
    foreign.name = "physics".into();
    foreign.organization = "uni".into();
    for a in [stale, dept, foreign] {
        slurm.accounts.insert(a.name.clone(), a);
    }
    let d = diff(&slurm, &wanted, None, "c1");
    let text: Vec<String> = d.commands.iter().map(|c| c.join(" ")).collect();
    assert_eq!(
        text,
        [
            "modify account where name=nlp cluster=c1 set GrpTRES=gres/gpu:a100-sxm4-80gb=-1",
            "delete account where name=old-team cluster=c1",
            "delete account where name=old-dept cluster=c1",
        ]
    );
    assert_eq!(d.changes[1].kind, ChangeKind::Delete);
}

#[test]
fn a_foreign_qos_of_the_same_name_is_adopted() {
    let wanted = desired(&example(), &Mapping::default()).unwrap();
    let mut slurm = wanted.clone();
    // Slurm's own default QOS is called `normal` too.
    slurm.qos.insert(
        "normal".into(),
        Qos {
            name: "normal".into(),
            priority: 0,
            preempt: BTreeSet::new(),
            preempt_mode: "cluster".into(),
            grace_secs: 0,
            description: "Normal QOS default".into(),
        },
    );
    let d = diff(&slurm, &wanted, None, "c1");
    assert_eq!(
        d.commands,
        [vec![
            "modify",
            "qos",
            "where",
            "name=normal",
            "set",
            "Priority=100",
            "Preempt=low",
            "PreemptMode=requeue",
            "GraceTime=300",
            "Description=gitfleet priority class normal",
        ]]
    );
}

// ---- applying a diff converges (a model of sacctmgr over SlurmState) ----

fn kv(args: &[String]) -> BTreeMap<String, String> {
    args.iter()
        .filter_map(|a| a.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn list(v: &str) -> BTreeSet<String> {
    v.split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn set_account(a: &mut Account, fields: &BTreeMap<String, String>) {
    for (k, v) in fields {
        match k.as_str() {
            "Parent" => a.parent = v.clone(),
            "Fairshare" => a.fairshare = v.clone(),
            "QOS" => a.qos = list(v),
            "DefaultQOS" => a.default_qos = if v == "-1" { String::new() } else { v.clone() },
            "Organization" => a.organization = v.clone(),
            "GrpTRES" => {
                for item in v.split(',') {
                    let (t, n) = item.split_once('=').unwrap();
                    if n == "-1" {
                        a.grp_tres.remove(t);
                    } else {
                        a.grp_tres.insert(t.to_string(), n.parse().unwrap());
                    }
                }
            }
            _ => {}
        }
    }
}

fn set_qos(q: &mut Qos, fields: &BTreeMap<String, String>) {
    for (k, v) in fields {
        match k.as_str() {
            "Priority" => q.priority = v.parse().unwrap(),
            "Preempt" => q.preempt = list(v),
            "PreemptMode" => q.preempt_mode = v.clone(),
            "GraceTime" => q.grace_secs = v.parse().unwrap(),
            "Description" => q.description = v.clone(),
            _ => {}
        }
    }
}

/// Carries out commands as sacctmgr would, checking references exist.
fn run(state: &mut SlurmState, commands: &[Vec<String>]) {
    for c in commands {
        let name_of = |c: &[String]| {
            c.iter()
                .find_map(|a| a.strip_prefix("name="))
                .unwrap()
                .to_string()
        };
        match (c[0].as_str(), c[1].as_str()) {
            ("add", "qos") => {
                let mut q = Qos {
                    name: c[2].clone(),
                    priority: 0,
                    preempt: BTreeSet::new(),
                    preempt_mode: "cluster".into(),
                    grace_secs: 0,
                    description: String::new(),
                };
                set_qos(&mut q, &kv(&c[3..]));
                state.qos.insert(q.name.clone(), q);
            }
            ("modify", "qos") => {
                let fields = kv(&c[5..]);
                if let Some(p) = fields.get("Preempt") {
                    assert!(list(p).iter().all(|n| state.qos.contains_key(n)), "{c:?}");
                }
                set_qos(state.qos.get_mut(&name_of(c)).unwrap(), &fields);
            }
            ("delete", "qos") => {
                state.qos.remove(&name_of(c));
            }
            ("add", "account") => {
                let fields = kv(&c[3..]);
                let parent = &fields["Parent"];
                assert!(
                    parent == "root" || state.accounts.contains_key(parent),
                    "{c:?}"
                );
                let mut a = Account {
                    name: c[2].clone(),
                    parent: String::new(),
                    fairshare: "1".into(),
                    grp_tres: BTreeMap::new(),
                    qos: BTreeSet::new(),
                    default_qos: String::new(),
                    organization: String::new(),
                };
                set_account(&mut a, &fields);
                state.accounts.insert(a.name.clone(), a);
            }
            ("modify", "account") => {
                let fields = kv(&c[6..]);
                set_account(state.accounts.get_mut(&name_of(c)).unwrap(), &fields);
            }
            ("delete", "account") => {
                let name = name_of(c);
                assert!(
                    state.accounts.values().all(|a| a.parent != name),
                    "children go first: {c:?}"
                );
                state.accounts.remove(&name);
            }
            _ => panic!("unexpected command {c:?}"),
        }
    }
}

fn arb_state() -> impl Strategy<Value = SlurmState> {
    const NAMES: [&str; 5] = ["a", "b", "c", "d", "e"];
    let qos = proptest::collection::btree_map(
        prop::sample::select(&["q1", "q2", "q3"][..]),
        (0u32..3, any::<bool>(), 0u64..3, any::<bool>()),
        0..3,
    );
    let accounts = proptest::collection::btree_map(
        prop::sample::select(&NAMES[..]),
        (
            0usize..6,
            1u32..4,
            proptest::option::of(1u64..3),
            any::<bool>(),
        ),
        0..5,
    );
    (qos, accounts).prop_map(|(qos, accounts)| {
        let qos: BTreeMap<String, Qos> = qos
            .into_iter()
            .map(|(n, (p, pre, g, managed))| {
                (
                    n.to_string(),
                    Qos {
                        name: n.to_string(),
                        priority: p,
                        preempt: if pre { set(&["q1"]) } else { BTreeSet::new() },
                        preempt_mode: "requeue".into(),
                        grace_secs: g,
                        description: if managed {
                            format!("gitfleet priority class {n}")
                        } else {
                            "site".into()
                        },
                    },
                )
            })
            .collect();
        let qos: BTreeMap<String, Qos> = qos
            .iter()
            .map(|(n, q)| {
                let mut q = q.clone();
                q.preempt.retain(|p| qos.contains_key(p));
                (n.clone(), q)
            })
            .collect();
        let keys: Vec<&str> = accounts.keys().copied().collect();
        let accounts = accounts
            .iter()
            .map(|(n, (parent, share, limit, managed))| {
                // Parents only among accounts sorting before: no cycles.
                let before: Vec<&&str> = keys.iter().filter(|k| **k < *n).collect();
                let parent = before
                    .get(*parent)
                    .map_or("root".to_string(), |p| p.to_string());
                (
                    n.to_string(),
                    Account {
                        name: n.to_string(),
                        parent,
                        fairshare: share.to_string(),
                        grp_tres: limit
                            .map(|l| BTreeMap::from([("gres/gpu:h100".to_string(), l)]))
                            .unwrap_or_default(),
                        qos: qos.keys().cloned().collect(),
                        default_qos: String::new(),
                        organization: if *managed {
                            "gitfleet".into()
                        } else {
                            String::new()
                        },
                    },
                )
            })
            .collect();
        SlurmState {
            accounts,
            qos,
            partitions: Default::default(),
        }
    })
}

proptest! {
    #[test]
    fn applying_the_diff_converges(current in arb_state(), wanted in arb_state()) {
        // What gitfleet wants is managed by construction.
        let mut wanted = wanted;
        for a in wanted.accounts.values_mut() { a.organization = "gitfleet".into(); }
        for q in wanted.qos.values_mut() { q.description = format!("gitfleet priority class {}", q.name); }
        // An unmanaged account under a managed one that goes would block its
        // deletion in Slurm too; keep the generated trees apart.
        let mut current = current;
        let keep: Vec<String> = current.accounts.values()
            .filter(|a| !a.managed() || wanted.accounts.contains_key(&a.name))
            .map(|a| a.name.clone()).collect();
        for a in current.accounts.values_mut() {
            if keep.contains(&a.name) && a.parent != "root" && !keep.contains(&a.parent) {
                a.parent = "root".into();
            }
        }
        let d = diff(&current, &wanted, None, "c");
        let mut slurm = current.clone();
        run(&mut slurm, &d.commands);
        let again = diff(&slurm, &wanted, None, "c");
        prop_assert!(again.is_empty(), "not converged: {:?}", again.changes);
        for (name, a) in &wanted.accounts {
            let mut expected = a.clone();
            if wanted.qos.is_empty() {
                // Without priority classes the QOS lists are not gitfleet's.
                expected.qos = slurm.accounts[name].qos.clone();
                expected.default_qos = slurm.accounts[name].default_qos.clone();
            }
            prop_assert_eq!(&slurm.accounts[name], &expected);
        }
        // Applying twice is a no-op.
        prop_assert!(diff(&slurm, &wanted, Some(&wanted), "c").commands.is_empty());
    }
}
