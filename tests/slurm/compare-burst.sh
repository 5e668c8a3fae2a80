#!/usr/bin/env bash
# Side by side (issue 18): the same 5,000 jobs on 512 virtual 8-GPU nodes
# (the fleet generator with seed 1, as `cargo bench --bench reconcile --
# burst`), planned by gitfleet and scheduled by Slurm on its own, and
# optionally gitfleet's scheduler mode driving Slurm. Not part of the tests:
# it needs root, starts 512 slurmd and takes about 10 minutes.
#
#   tests/slurm/compare-burst.sh [--scheduler-mode] [DIR]
#
# GITFLEET: the gitfleet binary (default: target/release/gitfleet, built
# when missing; CARGO_TARGET_DIR is honoured). NODES, JOBS: the size (512,
# 5000). QUIET: seconds without a new start after which Slurm is taken to
# have started all that fit (default 70: two backfill intervals and more
# than one periodic main-scheduler pass). RECONCILE_TIMEOUT: seconds the
# scheduler-mode `reconcile --once` may take (default 900).
#
# (a) gitfleet: `gitfleet plan` wall time (median of 5), jobs placed, GPUs.
# (b) Slurm: the cluster of tests/slurm/start-cluster.sh with
#     GITFLEET_SLURM_NODES=512 (one slurmd per node, racks of 8 as
#     topology/tree switches), the fleet's accounts and QOS applied by
#     `gitfleet apply --executor slurm` (fair share, GrpTRES limits, QOS
#     priorities), the jobs submitted with their account, QOS, GPUs and time
#     limit (tests/slurm/burst-jobs.py) to the partition set DOWN, then the
#     partition set UP (t0): time until the last job that started, GPUs
#     allocated, mean wait of the started jobs (StartTime - t0), sdiag's
#     main and backfill cycle times.
# (c) --scheduler-mode: the jobs cancelled, then one `gitfleet reconcile
#     --once --executor slurm --slurm-mode scheduler`: its time, and the time
#     until every job it placed is running in Slurm.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
scheduler_mode=0
if [ "${1:-}" = --scheduler-mode ]; then scheduler_mode=1; shift; fi
dir=${1:-$(mktemp -d /tmp/gitfleet-burst.XXXXXX)}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
nodes=${NODES:-512}
jobs=${JOBS:-5000}
quiet=${QUIET:-70}
now=2026-11-21T10:00:00Z

gitfleet=${GITFLEET:-${CARGO_TARGET_DIR:-$root/target}/release/gitfleet}
if [ ! -x "$gitfleet" ]; then
  (cd "$root" && cargo build --release --bin gitfleet)
fi
export PATH=$PATH:/usr/sbin
ms() { python3 -c "import sys; print(round((float(sys.argv[2]) - float(sys.argv[1])) * 1000, 1))" "$@"; }

echo "== generating $jobs jobs on $nodes nodes (seed 1) in $dir/gen"
"$gitfleet" generate --out "$dir/gen" --nodes "$nodes" --gpus-per-node 8 \
  --pending "$jobs" --running 0 --seed 1 --storm --now "$now" >/dev/null
repo=$dir/gen/repo

echo "== (a) gitfleet plan"
times=()
for _ in 1 2 3 4 5; do
  t0=$(date +%s.%N)
  "$gitfleet" plan "$repo" --now "$now" -o json >"$dir/plan.json"
  t1=$(date +%s.%N)
  times+=("$(ms "$t0" "$t1")")
done
plan_ms=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 3p)
read -r placed allocated gpus < <(python3 -c "
import json, sys
s = json.load(open(sys.argv[1]))['summary']
print(s['placed_jobs'], s['allocated'], s['gpus'])" "$dir/plan.json")
echo "gitfleet plan: ${plan_ms} ms (median of 5, wall, the whole command), $placed jobs placed, $allocated of $gpus GPUs"

echo "== (b) Slurm on its own: starting $nodes slurmd"
cleanup() {
  if [ -f "$dir/cluster/slurm.conf" ]; then
    SLURM_CONF=$dir/cluster/slurm.conf scancel --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 1 180); do
      [ "$(SLURM_CONF=$dir/cluster/slurm.conf squeue -h 2>/dev/null | wc -l)" = 0 ] && break
      sleep 1
    done
  fi
  bash "$root/tests/slurm/stop-cluster.sh" "$dir/cluster"
}
trap cleanup EXIT
t0=$(date +%s.%N)
GITFLEET_SLURM_NODES=$nodes bash "$root/tests/slurm/start-cluster.sh" "$dir/cluster" >/dev/null
echo "cluster up in $(ms "$t0" "$(date +%s.%N)") ms"
export SLURM_CONF=$dir/cluster/slurm.conf
"$gitfleet" apply "$repo" --executor slurm --auto-approve --state "$dir/state" >"$dir/apply.log" 2>&1 \
  || { tail "$dir/apply.log"; exit 1; }
grep "slurm configuration" "$dir/apply.log"
python3 "$root/tests/slurm/burst-jobs.py" "$repo" h100-sxm-80gb >"$dir/jobs.tsv"
accounts=$(tr '\t' '\n' <"$dir/jobs.tsv" | sed -n 's/^--account=//p' | sort -u | paste -sd,)
sacctmgr -i add user "$(id -un)" account="$accounts" >/dev/null

scontrol update PartitionName=gpu State=DOWN
t0=$(date +%s.%N)
python3 "$root/tests/slurm/burst-jobs.py" --submit <"$dir/jobs.tsv" >"$dir/ids"
echo "submitted $(wc -l <"$dir/ids") jobs in $(ms "$t0" "$(date +%s.%N)") ms (partition down)"

sdiag -r >/dev/null
start=$(date +%s.%N)
scontrol update PartitionName=gpu State=UP
last=0 last_change=$(date +%s)
while :; do
  sleep 2
  running=$(squeue -h -t R | wc -l)
  if [ "$running" != "$last" ]; then last=$running; last_change=$(date +%s); fi
  [ $(($(date +%s) - last_change)) -ge "$quiet" ] && break
  [ $(($(date +%s) - ${start%.*})) -ge 900 ] && { echo "still starting after 900 s"; break; }
done
squeue -h -t R -o '%S|%i' >"$dir/started"
squeue -h -t R -O 'tres-alloc:300' >"$dir/tres"
sdiag >"$dir/sdiag.txt"
python3 - "$start" "$dir" <<'PY'
import datetime, re, sys
start, d = float(sys.argv[1]), sys.argv[2]
starts = [datetime.datetime.fromisoformat(l.split("|")[0]).timestamp()
          for l in open(f"{d}/started") if l.strip()]
gpus = sum(int(m) for m in re.findall(r"gres/gpu=(\d+)", open(f"{d}/tres").read()))
sdiag = open(f"{d}/sdiag.txt").read()
main_part, bf_part = sdiag.split("Backfilling stats", 1)
def field(text, name):
    m = re.search(re.escape(name) + r":\s+(\d+)", text)
    return int(m.group(1)) if m else 0
backfilled = field(bf_part, "Total backfilled jobs (since last slurm start)")
waits = [max(0.0, s - start) for s in starts]
print(f"Slurm: {len(starts)} jobs started, {gpus} GPUs allocated; "
      f"last start {max(waits):.0f} s after the partition came up (1 s resolution), "
      f"mean wait of the started jobs {sum(waits) / len(waits):.1f} s")
print(f"sdiag main scheduler: mean cycle {field(main_part, 'Mean cycle') / 1000:.0f} ms, "
      f"max {field(main_part, 'Max cycle') / 1000:.0f} ms, {field(main_part, 'Total cycles')} cycles; "
      f"backfill: mean cycle {field(bf_part, 'Mean cycle') / 1000:.0f} ms, "
      f"max {field(bf_part, 'Max cycle') / 1000:.0f} ms, {field(bf_part, 'Total cycles')} cycles, "
      f"{backfilled} jobs backfilled")
PY

if [ "$scheduler_mode" = 1 ]; then
  echo "== (c) gitfleet scheduler mode driving Slurm"
  scancel --user="$(id -un)"
  for _ in $(seq 1 180); do [ "$(squeue -h | wc -l)" = 0 ] && break; sleep 1; done
  # The generated jobs run `python train.py`, which ends at once here: let
  # them sleep instead, as Slurm's did (the plan does not change).
  sed -i "s/command: \[python, train.py\]/command: [sleep, '100000']/" "$repo"/jobs/*.yaml
  t0=$(date +%s.%N)
  rc=0
  timeout "${RECONCILE_TIMEOUT:-900}" "$gitfleet" reconcile "$repo" --once --executor slurm \
    --slurm-mode scheduler --state "$dir/state-scheduler" >"$dir/reconcile.log" 2>&1 || rc=$?
  t1=$(date +%s.%N)
  if [ "$rc" = 124 ]; then
    echo "gitfleet reconcile --once (scheduler mode): stopped after ${RECONCILE_TIMEOUT:-900} s with $(squeue -h | wc -l) jobs submitted, $(squeue -h -t R | wc -l) running"
    exit 0
  fi
  [ "$rc" = 0 ] || { tail "$dir/reconcile.log"; exit 1; }
  submitted=$(squeue -h | wc -l)
  for _ in $(seq 1 600); do
    [ "$(squeue -h -t R | wc -l)" -ge "$submitted" ] && break
    sleep 1
  done
  t2=$(date +%s.%N)
  gpus_c=$(squeue -h -t R -O 'tres-alloc:300' | grep -o 'gres/gpu=[0-9]*' | cut -d= -f2 | paste -sd+ | bc)
  echo "gitfleet reconcile --once (scheduler mode): $(ms "$t0" "$t1") ms for $submitted jobs submitted pinned; $(squeue -h -t R | wc -l) running (${gpus_c:-0} GPUs) after $(ms "$t0" "$t2") ms"
fi
