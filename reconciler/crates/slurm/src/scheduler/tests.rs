//! Scheduler mode against recorded command outputs.

use super::*;
use exec::{MemoryKv, StopView};
use std::sync::Mutex;

/// Answers `sinfo` and `squeue` from recorded outputs, `sbatch` with
/// job 42, and keeps every command line.
#[derive(Debug, Default)]
struct Recorded {
    squeue: Mutex<String>,
    sacct: Mutex<String>,
    calls: Mutex<Vec<String>>,
}

impl Runner for Arc<Recorded> {
    fn run(&self, program: &str, args: &[String]) -> Result<String, RunError> {
        let line = format!("{program} {}", args.join(" "));
        self.calls.lock().unwrap().push(line);
        Ok(match program {
            "sinfo" => "gpu-1|idle|gpu*|gpu:h100-sxm-80gb:8|none\ngpu-2|idle|gpu*|gpu:h100-sxm-80gb:8|none\ngpu-3|down|gpu*|gpu:a100-sxm4-80gb:8|test\n".into(),
            "squeue" => self.squeue.lock().unwrap().clone(),
            "sbatch" => "42\n".into(),
            "sacct" => self.sacct.lock().unwrap().clone(),
            _ => String::new(),
        })
    }
}

impl Recorded {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
    fn queue(&self, state: &str, reason: &str) {
        *self.squeue.lock().unwrap() = format!(
            r#"{{"jobs":[{{"job_id":42,"name":"gitfleet-train","comment":"gitfleet:train:1","job_state":"{state}","state_reason":"{reason}","exit_code":36608,"nodes":"gpu-[1-2]"}}]}}"#
        );
    }
}

fn fleet() -> Fleet {
    let yaml = "apiVersion: gitfleet/v1\nkind: Queue\nmetadata: {name: nlp}\nspec:\n  quota:\n    - {model: H100-SXM-80GB, guaranteed: 16, limit: 16}\n---\napiVersion: gitfleet/v1\nkind: PriorityClass\nmetadata: {name: low}\nspec: {value: 1, preemptible: true, gracePeriod: 30s, default: true}\n---\napiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: h100}\nspec:\n  gpu: {model: H100-SXM-80GB, count: 8}\n  size: {min: 2, max: 2}\n---\napiVersion: gitfleet/v1\nkind: NodePool\nmetadata: {name: a100}\nspec:\n  gpu: {model: A100-SXM4-80GB, count: 8}\n  size: {min: 1, max: 1}\n---\napiVersion: gitfleet/v1\nkind: Job\nmetadata: {name: train}\nspec:\n  queue: nlp\n  replicas: 2\n  gpusPerReplica: 8\n  timeLimit: 5m\n  command: [sleep, '300']\n";
    let loaded = load::load_fleet(&[load::SourceFile::new("f.yaml", yaml)]);
    assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
    loaded.fleet
}

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

#[test]
fn places_once_preempts_with_grace_reports_the_stop_and_drains() {
    let slurm = Arc::new(Recorded::default());
    *slurm.squeue.lock().unwrap() = r#"{"jobs":[]}"#.into();
    let store: Arc<dyn KeyValue> = Arc::new(MemoryKv::default());
    let mut s = Scheduler::new(slurm.clone(), "gitfleet".into(), Mapping::default(), store);
    let fleet = fleet();
    s.set_fleet(&fleet);
    let now = at("2026-11-23T00:00:00Z");

    let seen = s.observe(now, &[]).unwrap();
    assert!(seen.events.is_empty());
    let pools: Vec<_> = seen.nodes.iter().map(|n| n.pool.as_deref()).collect();
    assert_eq!(pools, [Some("h100"), Some("h100"), Some("a100")]);
    assert!(seen.nodes[2].gpus.iter().all(|g| !g.healthy), "down");
    slurm.take();

    let placement: Vec<NodeGpus> = ["gpu-1", "gpu-2"]
        .iter()
        .map(|n| NodeGpus {
            node: (*n).to_string(),
            gpus: (0..8).collect(),
        })
        .collect();
    let place = Action::Place {
        job: "train".into(),
        placement: placement.clone(),
        reason: String::new(),
    };
    let ctx = ActionContext {
        spec: fleet.jobs.first(),
        attempt: Some("1".into()),
        grace: "30s".parse().unwrap(),
        revision: "r1",
    };
    // The duplicate check reads the listing the observation took.
    assert_eq!(s.execute(&place, &ctx).unwrap(), Outcome::Done);
    assert_eq!(
        slurm.take(),
        [
            "sacctmgr -i add user gitfleet account=nlp",
            "sbatch --parsable --hold --job-name=gitfleet-train --comment=gitfleet:train:1 --account=nlp --nodes=2 --ntasks=2 --ntasks-per-node=1 --nodelist=gpu-1,gpu-2 --gres=gpu:h100-sxm-80gb:8 --output=/dev/null --qos=low --time=5 --wrap=srun sleep 300",
            "scontrol release 42",
        ]
    );

    // Carried out again in the same iteration: known from sbatch's
    // answer, nothing run.
    slurm.queue("RUNNING", "None");
    assert_eq!(s.execute(&place, &ctx).unwrap(), Outcome::Done);
    assert_eq!(slurm.take(), Vec::<String>::new());
    // Carried out again after a crash (a new iteration, before its
    // observation): the queue is listed, the job found, not submitted
    // twice; a job already released is left alone.
    s.begin();
    assert_eq!(s.execute(&place, &ctx).unwrap(), Outcome::Done);
    assert_eq!(slurm.take(), ["squeue --json"]);

    let preempt = Action::Preempt {
        job: "train".into(),
        for_job: "other".into(),
        reason: String::new(),
    };
    assert_eq!(s.execute(&preempt, &ctx).unwrap(), Outcome::Underway);
    assert_eq!(slurm.take(), ["squeue --json", "scancel --signal=TERM 42"]);

    // Still running within the grace period: left; after it: cancelled.
    let mut view = JobView {
        job: "train",
        placement: &placement,
        started: Some(now),
        stop: Some(StopView {
            kind: StopKind::Preempt,
            since: now,
        }),
        spec: fleet.jobs.first(),
        grace: "30s".parse().unwrap(),
    };
    let seen = s.observe(at("2026-11-23T00:00:10Z"), &[view]).unwrap();
    assert!(seen.events.is_empty());
    assert!(!slurm.take().iter().any(|c| c.starts_with("scancel")));
    s.observe(at("2026-11-23T00:00:31Z"), &[view]).unwrap();
    assert!(slurm.take().contains(&"scancel 42".to_string()));

    // Ended: a stop (it was told to), an exit code otherwise.
    slurm.queue("FAILED", "NonZeroExitCode");
    let seen = s.observe(at("2026-11-23T00:00:40Z"), &[view]).unwrap();
    assert_eq!(
        seen.events,
        [Event::Stopped {
            job: "train".into(),
            at: at("2026-11-23T00:00:40Z")
        }]
    );
    view.stop = None;
    let seen = s.observe(at("2026-11-23T00:00:41Z"), &[view]).unwrap();
    assert_eq!(
        seen.events,
        [Event::Exited {
            job: "train".into(),
            at: at("2026-11-23T00:00:41Z"),
            exit_code: Some(143)
        }]
    );

    let drain = Action::Drain {
        node: "gpu-3".into(),
        reason: "GPUs 0-7 unhealthy".into(),
    };
    assert!(!s.already_done(&drain));
    slurm.take();
    assert_eq!(s.execute(&drain, &ctx).unwrap(), Outcome::Done);
    assert_eq!(
        slurm.take(),
        ["scontrol update NodeName=gpu-3 State=DRAIN Reason=gitfleet: GPUs 0-7 unhealthy"]
    );
    assert!(s.already_done(&drain));
}

#[test]
fn requeue_mode_places_the_preempted_job_again_under_its_id() {
    let slurm = Arc::new(Recorded::default());
    *slurm.squeue.lock().unwrap() = r#"{"jobs":[]}"#.into();
    let store: Arc<dyn KeyValue> = Arc::new(MemoryKv::default());
    let mut s = Scheduler::new(slurm.clone(), "u".into(), Mapping::default(), store)
        .with_preempt_mode(PreemptMode::Requeue);
    let fleet = fleet();
    s.set_fleet(&fleet);
    let now = at("2026-11-23T00:00:00Z");
    s.observe(now, &[]).unwrap();
    slurm.take();
    let on = |nodes: &[&str]| -> Vec<NodeGpus> {
        nodes
            .iter()
            .map(|n| NodeGpus {
                node: (*n).to_string(),
                gpus: (0..8).collect(),
            })
            .collect()
    };
    let place = |nodes: &[&str]| Action::Place {
        job: "train".into(),
        placement: on(nodes),
        reason: String::new(),
    };
    let ctx = |attempt: &str, grace: &str| ActionContext {
        spec: fleet.jobs.first(),
        attempt: Some(attempt.into()),
        grace: grace.parse().unwrap(),
        revision: "r1",
    };
    s.execute(&place(&["gpu-1", "gpu-2"]), &ctx("1", "30s"))
        .unwrap();
    let calls = slurm.take();
    assert!(
        calls[1].contains(" --time=5 --requeue --wrap="),
        "{calls:?}"
    );
    assert_eq!(calls[2], "scontrol release 42");

    // Preempted with grace: signalled, then requeued and held.
    slurm.queue("RUNNING", "None");
    let preempt = Action::Preempt {
        job: "train".into(),
        for_job: "other".into(),
        reason: String::new(),
    };
    s.execute(&preempt, &ctx("1", "30s")).unwrap();
    assert_eq!(slurm.take(), ["squeue --json", "scancel --signal=TERM 42"]);
    let placement = on(&["gpu-1", "gpu-2"]);
    let view = JobView {
        job: "train",
        placement: &placement,
        started: Some(now),
        stop: Some(StopView {
            kind: StopKind::Preempt,
            since: now,
        }),
        spec: fleet.jobs.first(),
        grace: "30s".parse().unwrap(),
    };
    let seen = s.observe(at("2026-11-23T00:00:31Z"), &[view]).unwrap();
    assert!(seen.events.is_empty(), "still on its nodes");
    assert!(
        slurm
            .take()
            .contains(&"scontrol requeuehold 42".to_string())
    );
    // Back to pending, held: stopped (it holds no nodes).
    slurm.queue("PENDING", "JobHeldUser");
    let seen = s.observe(at("2026-11-23T00:00:40Z"), &[view]).unwrap();
    assert_eq!(
        seen.events,
        [Event::Stopped {
            job: "train".into(),
            at: at("2026-11-23T00:00:40Z")
        }]
    );
    assert!(!slurm.take().iter().any(|c| c.starts_with("scancel")));

    // Placed again (a new attempt, other nodes): the same Slurm job,
    // updated and released; nothing submitted.
    s.execute(&place(&["gpu-2", "gpu-1"]), &ctx("2", "0s"))
        .unwrap();
    assert_eq!(
        slurm.take(),
        [
            "scontrol update JobId=42 NodeList=gpu-2,gpu-1 Comment=gitfleet:train:2 StartTime=now",
            "scontrol release 42",
        ]
    );
    // Carried out again after a crash: found under its new comment.
    *slurm.squeue.lock().unwrap() = r#"{"jobs":[{"job_id":42,"name":"gitfleet-train","comment":"gitfleet:train:2","job_state":"RUNNING","state_reason":"None"}]}"#.into();
    s.begin();
    s.execute(&place(&["gpu-2", "gpu-1"]), &ctx("2", "0s"))
        .unwrap();
    assert_eq!(slurm.take(), ["squeue --json"]);

    // Preempted again, without grace: requeued at once.
    s.execute(&preempt, &ctx("2", "0s")).unwrap();
    assert_eq!(slurm.take(), ["squeue --json", "scontrol requeuehold 42"]);
    // Ended on SIGTERM within a grace period: requeued and held all
    // the same.
    slurm.queue("FAILED", "NonZeroExitCode");
    let seen = s.observe(at("2026-11-23T00:00:50Z"), &[view]).unwrap();
    assert_eq!(seen.events.len(), 1, "stopped");
    assert!(
        slurm
            .take()
            .contains(&"scontrol requeuehold 42".to_string())
    );

    // A held job submitted otherwise (the spec changed) is cancelled
    // and a new one submitted.
    slurm.queue("PENDING", "JobHeldUser");
    s.begin();
    let mut changed = fleet.jobs[0].clone();
    changed.spec.time_limit = Some("10m".parse().unwrap());
    let ctx3 = ActionContext {
        spec: Some(&changed),
        ..ctx("3", "0s")
    };
    s.execute(&place(&["gpu-1", "gpu-2"]), &ctx3).unwrap();
    let calls = slurm.take();
    assert_eq!(calls[..2], ["squeue --json", "scancel 42"]);
    assert!(calls[2].starts_with("sbatch "), "{calls:?}");

    // A held job whose job left the fleet is cancelled.
    let mut gone = fleet.clone();
    gone.jobs.clear();
    s.set_fleet(&gone);
    s.observe(at("2026-11-23T00:01:00Z"), &[]).unwrap();
    assert!(slurm.take().contains(&"scancel 42".to_string()));
}

#[test]
fn an_image_needs_the_operators_option() {
    let slurm = Arc::new(Recorded::default());
    let store: Arc<dyn KeyValue> = Arc::new(MemoryKv::default());
    let s = Scheduler::new(slurm.clone(), "u".into(), Mapping::default(), store.clone());
    let mut job = fleet().jobs[0].clone();
    job.spec.image = Some("nvcr.io/nvidia/pytorch:24.01-py3".into());
    job.spec.gpu = Some(model::spec::GpuSelector {
        models: vec!["H100-SXM-80GB".into()],
    });
    let part = |n: &str| NodeGpus {
        node: n.into(),
        gpus: (0..8).collect(),
    };
    let placement = [part("gpu-1"), part("gpu-2")];
    let e = s.submission("train", &placement, &job, None).unwrap_err();
    assert!(e.to_string().contains("--slurm-image-option"), "{e}");
    for (option, arg) in [
        (
            ImageOption::ContainerImage,
            "--container-image=nvcr.io/nvidia/pytorch:24.01-py3",
        ),
        (
            ImageOption::Container,
            "--container=nvcr.io/nvidia/pytorch:24.01-py3",
        ),
    ] {
        let s = Scheduler::new(slurm.clone(), "u".into(), Mapping::default(), store.clone())
            .with_image_option(option);
        let args = s
            .submission("train", &placement, &job, None)
            .unwrap()
            .sbatch_args();
        assert!(args.contains(&arg.to_string()), "{args:?}");
    }
}

/// Slurm jobs `train-0` … as the fleet's `train`, each on `gpu-1`.
fn burst(fleet: &Fleet, n: usize) -> Vec<(Action, Object<JobSpec>)> {
    (0..n)
        .map(|i| {
            let mut spec = fleet.jobs[0].clone();
            spec.metadata.name = format!("train-{i}");
            let place = Action::Place {
                job: format!("train-{i}"),
                placement: vec![NodeGpus {
                    node: "gpu-1".into(),
                    gpus: (0..8).collect(),
                }],
                reason: String::new(),
            };
            (place, spec)
        })
        .collect()
}

#[test]
fn a_burst_of_placements_lists_the_queue_once_per_iteration() {
    let slurm = Arc::new(Recorded::default());
    *slurm.squeue.lock().unwrap() = r#"{"jobs":[]}"#.into();
    let store: Arc<dyn KeyValue> = Arc::new(MemoryKv::default());
    let mut s = Scheduler::new(slurm.clone(), "u".into(), Mapping::default(), store);
    let fleet = fleet();
    s.set_fleet(&fleet);
    let squeues = |calls: &[String]| calls.iter().filter(|c| *c == "squeue --json").count();
    let sbatches = |calls: &[String]| calls.iter().filter(|c| c.starts_with("sbatch")).count();
    let run = |s: &mut Scheduler<Arc<Recorded>>, burst: &[(Action, Object<JobSpec>)]| {
        for (place, spec) in burst {
            let ctx = ActionContext {
                spec: Some(spec),
                attempt: Some("1".into()),
                grace: "0s".parse().unwrap(),
                revision: "r1",
            };
            assert_eq!(s.execute(place, &ctx).unwrap(), Outcome::Done);
        }
    };
    let jobs = burst(&fleet, 20);

    // An iteration: observed, then 20 placed: one listing, not 21.
    s.begin();
    s.observe(at("2026-11-23T00:00:00Z"), &[]).unwrap();
    run(&mut s, &jobs);
    let calls = slurm.take();
    assert_eq!((squeues(&calls), sbatches(&calls)), (1, 20));

    // A restart carrying out the same intents before observing: one
    // listing; every job found in it (Slurm's queue now holds them),
    // none submitted again.
    let queue: Vec<String> = (0..20)
        .map(|i| format!(r#"{{"job_id":{},"name":"gitfleet-train-{i}","comment":"gitfleet:train-{i}:1","job_state":"RUNNING","state_reason":"None"}}"#, 100 + i))
        .collect();
    *slurm.squeue.lock().unwrap() = format!(r#"{{"jobs":[{}]}}"#, queue.join(","));
    s.begin();
    run(&mut s, &jobs);
    let calls = slurm.take();
    assert_eq!((squeues(&calls), sbatches(&calls)), (1, 0));
}

#[test]
fn a_job_gone_from_the_queue_is_read_from_sacct_by_its_id() {
    let slurm = Arc::new(Recorded::default());
    *slurm.squeue.lock().unwrap() = r#"{"jobs":[]}"#.into();
    *slurm.sacct.lock().unwrap() = "42|gitfleet-train|COMPLETED|0:0\n".into();
    let store: Arc<dyn KeyValue> = Arc::new(MemoryKv::default());
    store
        .write(&[("slurm/job/train".into(), Some("42".into()))])
        .unwrap();
    let mut s = Scheduler::new(slurm.clone(), "u".into(), Mapping::default(), store.clone());
    let fleet = fleet();
    s.set_fleet(&fleet);
    let placement = [NodeGpus {
        node: "gpu-1".into(),
        gpus: (0..8).collect(),
    }];
    let view = |job| JobView {
        job,
        placement: &placement,
        started: None,
        stop: None,
        spec: None,
        grace: "0s".parse().unwrap(),
    };
    let now = at("2026-11-23T00:00:00Z");
    let seen = s.observe(now, &[view("train"), view("lost")]).unwrap();
    assert_eq!(
        seen.events,
        [
            Event::Exited {
                job: "lost".into(),
                at: now,
                exit_code: None
            },
            Event::Exited {
                job: "train".into(),
                at: now,
                exit_code: Some(0)
            }
        ]
    );
    assert!(
        slurm
            .take()
            .contains(&"sacct -X -n -P -o JobIDRaw,JobName,State,ExitCode -j 42".to_string())
    );
    assert!(store.entries("slurm/job/").unwrap().is_empty(), "forgotten");
}

#[test]
fn uneven_gangs_and_jobs_without_a_command_are_refused() {
    let slurm = Arc::new(Recorded::default());
    let store: Arc<dyn KeyValue> = Arc::new(MemoryKv::default());
    let s = Scheduler::new(slurm, "u".into(), Mapping::default(), store);
    let fleet = fleet();
    let job = fleet.jobs.first().unwrap();
    let part = |n: &str| NodeGpus {
        node: n.into(),
        gpus: vec![0],
    };
    let uneven = [part("gpu-1"), part("gpu-1"), part("gpu-2")];
    let e = s.submission("train", &uneven, job, None).unwrap_err();
    assert!(e.to_string().contains("unevenly"), "{e}");
    let even = [part("gpu-1"), part("gpu-1")];
    let mut job = job.clone();
    job.spec.gpu = Some(model::spec::GpuSelector {
        models: vec!["H100-SXM-80GB".into()],
    });
    let submit = s.submission("train", &even, &job, None).unwrap();
    assert_eq!(
        (
            submit.tasks_per_node,
            submit.gpus_per_node,
            submit.attempt.as_str()
        ),
        (2, 16, "1")
    );
    assert_eq!(submit.gres_type, "h100-sxm-80gb", "from the job's model");
    job.spec
        .env
        .insert("WANDB".into(), model::spec::EnvValue::Plain("run-1".into()));
    let submit = s.submission("train", &even, &job, None).unwrap();
    assert_eq!(submit.env, [("WANDB".to_string(), "run-1".to_string())]);
    let token: model::spec::EnvValue =
        serde_json::from_str(r#"{"value": "s3cr3t", "sensitive": true}"#).unwrap();
    job.spec.env.insert("TOKEN".into(), token);
    let e = s.submission("train", &even, &job, None).unwrap_err();
    assert!(e.to_string().contains("env TOKEN: sensitive"), "{e}");
    job.spec.command.clear();
    let e = s.submission("train", &even, &job, None).unwrap_err();
    assert!(e.to_string().contains("no command"), "{e}");
}
