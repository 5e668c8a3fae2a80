#!/usr/bin/env python3
"""The Jobs of a fleet repository as `sbatch` argument lines (one job a
line, arguments separated by tabs), for tests/slurm/compare-burst.sh: the
same account (queue), QOS (priority class), GPUs and time limit as the
fleet's, for Slurm to schedule on its own (no node list; compare-burst.sh
submits them to a partition set DOWN, then sets it UP).

    burst-jobs.py REPO GRES_TYPE > jobs.tsv
    burst-jobs.py --submit < jobs.tsv > ids    # runs them (4 at a time)

A job of R replicas of G GPUs is `--ntasks=R --gpus-per-task=TYPE:G` (Slurm
packs the tasks as it likes, as gitfleet may); `topology: {required: rack}`
is `--switches=1` (one leaf switch of topology.conf per rack).
"""

import concurrent.futures
import pathlib
import subprocess
import sys

import yaml


def minutes(limit):
    """A fleet duration (`90m`, `58h`, `2d`, `1h30m`) in whole minutes."""
    total, number = 0, ""
    units = {"s": 1 / 60, "m": 1, "h": 60, "d": 1440}
    for ch in str(limit):
        if ch.isdigit():
            number += ch
        else:
            total += int(number) * units[ch]
            number = ""
    return max(1, int(total + 0.999))


def submit():
    """Runs `sbatch` for each line of stdin; prints the job ids, in order."""
    lines = [line.rstrip("\n").split("\t") for line in sys.stdin if line.strip()]

    def one(args):
        out = subprocess.run(["sbatch", *args], capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"sbatch {' '.join(args)}: {out.stderr.strip()}")
        return out.stdout.strip().split(";")[0]

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for job_id in pool.map(one, lines):
            print(job_id)


def main():
    if sys.argv[1] == "--submit":
        submit()
        return
    repo, gres = pathlib.Path(sys.argv[1]), sys.argv[2]
    for path in sorted(repo.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") != "Job":
                continue
            name, spec = doc["metadata"]["name"], doc["spec"]
            args = [
                "--parsable",
                f"--job-name=burst-{name}",
                f"--account={spec['queue']}",
                f"--ntasks={spec.get('replicas', 1)}",
                f"--gpus-per-task={gres}:{spec['gpusPerReplica']}",
                "--output=/dev/null",
            ]
            if spec.get("priorityClass"):
                args.append(f"--qos={spec['priorityClass']}")
            if spec.get("timeLimit"):
                args.append(f"--time={minutes(spec['timeLimit'])}")
            if (spec.get("topology") or {}).get("required") == "rack":
                args.append("--switches=1")
            args.append("--wrap=exec sleep 100000")
            print("\t".join(args))


if __name__ == "__main__":
    main()
