#!/usr/bin/env bash
# Checks gitfleet against a real NVIDIA host (driver + NVML): what
# `gitfleet inventory` reads against `nvidia-smi`, the watch mode, and the
# `local` executor running real CUDA work on the GPUs it placed, with a
# preemption (SIGTERM within the grace period, GPU memory given back).
#
# Usage: scripts/gpu-host-check.sh GITFLEET_BINARY OUT_DIR
# Needs: nvidia-smi, python3 with PyTorch (for the CUDA jobs). Exits non-zero
# at the first check that fails; OUT_DIR keeps every output for reading.
# CI has no GPU: this runs where one is lent (docs/inventory.md, "On a GPU host").
set -euo pipefail

bin=$(realpath "$1")
out=$(realpath -m "$2")
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" | tee -a "$out/summary.txt"; exit 1; }
ok() { echo "ok: $*" | tee -a "$out/summary.txt"; }

# 1. What NVML reads, against nvidia-smi.
nvidia-smi --query-gpu=index,uuid,name,memory.total,pci.bus_id \
    --format=csv,noheader,nounits >"$out/nvidia-smi.csv"
nvidia-smi >"$out/nvidia-smi.txt"
gpus=$(wc -l <"$out/nvidia-smi.csv")
"$bin" inventory --node gpu-0 --pool h100 -o json >"$out/inventory.json" 2>"$out/inventory.err"
"$bin" inventory --node gpu-0 --pool h100 >"$out/inventory.yaml"
python3 - "$out/nvidia-smi.csv" "$out/inventory.json" <<'EOF' | tee -a "$out/summary.txt"
import csv, json, sys
smi = [[c.strip() for c in row] for row in csv.reader(open(sys.argv[1]))]
inv = json.load(open(sys.argv[2]))
(node,) = inv["nodes"]
gpus = node["gpus"]
assert len(gpus) == len(smi), (len(gpus), len(smi))
for row, gpu in zip(smi, gpus):
    index, uuid, name, mem, bus = row
    assert gpu["index"] == int(index), (gpu, row)
    assert gpu["uuid"] == uuid, (gpu["uuid"], uuid)
    assert gpu["details"]["product"] == name, (gpu["details"], name)
    assert gpu["memoryMiB"] == int(mem), (gpu["memoryMiB"], mem)
    assert gpu["pciBusId"].lower() == bus.lower(), (gpu["pciBusId"], bus)
    assert gpu.get("healthy", True), gpu
    print(f"ok: GPU {index}: {uuid} {name} -> model {gpu['model']}, {mem} MiB, {bus}")
EOF
[ "${PIPESTATUS[0]}" = 0 ] || fail "inventory differs from nvidia-smi"

# 2. A GPU the pool expects but NVML does not find is reported missing.
"$bin" inventory --node gpu-0 --pool h100 -o json --expect-gpus $((gpus + 1)) >"$out/inventory-expect.json"
python3 - "$out/inventory-expect.json" "$gpus" <<'EOF' || fail "--expect-gpus did not report the missing GPU"
import json, sys
gpus = json.load(open(sys.argv[1]))["nodes"][0]["gpus"]
missing = [g for g in gpus if not g.get("healthy", True)]
assert len(missing) == 1 and missing[0]["index"] == int(sys.argv[2]), gpus
EOF
ok "--expect-gpus $((gpus + 1)) lists GPU $gpus as missing"

# 3. Watch mode: the document once, then it keeps running.
set +e
timeout 6 "$bin" inventory --node gpu-0 --pool h100 --watch --interval 1s >"$out/watch.txt" 2>&1
rc=$?
set -e
[ "$rc" = 124 ] || fail "inventory --watch ended by itself (exit $rc)"
grep -q "uuid" "$out/watch.txt" || fail "inventory --watch printed no document"
ok "inventory --watch ran until stopped"

# 4. The local executor: a preemptible job holds GPU memory; a higher-priority
# job needs the GPUs, preempts it (SIGTERM, grace) and runs real CUDA work.
python=$(command -v python3)
fleet=$work/fleet
mkdir -p "$fleet"
model=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["nodes"][0]["gpus"][0]["model"])' "$out/inventory.json")
cat >"$fleet/fleet.yaml" <<EOF
apiVersion: gitfleet/v1
kind: NodePool
metadata: {name: h100}
spec:
  gpu: {model: $model, count: $gpus}
  size: {min: 1, max: 1}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: low}
spec: {value: 10, preemptible: true, gracePeriod: 20s, default: true}
---
apiVersion: gitfleet/v1
kind: PriorityClass
metadata: {name: high}
spec: {value: 100, preemptible: false}
---
apiVersion: gitfleet/v1
kind: Queue
metadata: {name: research}
spec: {quota: [{model: $model, guaranteed: $gpus, limit: $gpus}]}
EOF
cat >"$work/hold.py" <<'EOF'
import os, signal, sys, time, torch
print("CUDA_VISIBLE_DEVICES", os.environ["CUDA_VISIBLE_DEVICES"], "devices", torch.cuda.device_count(), flush=True)
block = torch.empty(8 << 30, dtype=torch.uint8, device="cuda")
def stop(signum, frame):
    global block
    del block
    torch.cuda.empty_cache()
    print("SIGTERM: checkpointed and freed", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("holding", torch.cuda.memory_allocated() >> 20, "MiB", flush=True)
while True:
    time.sleep(0.2)
EOF
cat >"$work/matmul.py" <<'EOF'
import os, torch
n = torch.cuda.device_count()
a = torch.randn(4096, 4096, device="cuda")
c = a @ a.T
print("CUDA_VISIBLE_DEVICES", os.environ["CUDA_VISIBLE_DEVICES"], "devices", n,
      torch.cuda.get_device_name(0), "trace", round(float(c.trace()) / 4096))
EOF
env_line="env: {LD_LIBRARY_PATH: '${LD_LIBRARY_PATH:-}'}"
cat >"$fleet/jobs.yaml" <<EOF
apiVersion: gitfleet/v1
kind: Job
metadata: {name: hold}
spec:
  queue: research
  gpusPerReplica: $gpus
  $env_line
  command: [$python, $work/hold.py]
EOF
"$bin" inventory --node gpu-0 --pool h100 >"$work/host.yaml"
state=$work/state
reconcile() {
    "$bin" reconcile "$fleet" --no-git --executor local --observed "$work/host.yaml" \
        --state "$state" --listen off --interval 1s --iterations "$1" >>"$out/reconcile.txt" 2>&1
}
# Runs the loop a few iterations at a time until CONDITION holds (a
# replica's first CUDA call can take seconds: PyTorch loads its libraries),
# at most about 120 s.
reconcile_until() {
    for _ in $(seq 40); do
        if eval "$1"; then return 0; fi
        reconcile 3 || return 1
    done
    eval "$1"
}
out_has() { grep -qs "$2" "$state/local/$1/0.out"; }
reconcile_until 'out_has hold holding' || fail "hold did not start: $(cat "$state/local/hold/0.err" 2>/dev/null)"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader >"$out/compute-apps-hold.txt"
[ -s "$out/compute-apps-hold.txt" ] || fail "no process on the GPU while hold runs"
ok "local executor: hold runs on the GPU ($(head -1 "$state/local/hold/0.out"))"

cat >>"$fleet/jobs.yaml" <<EOF
---
apiVersion: gitfleet/v1
kind: Job
metadata: {name: urgent}
spec:
  queue: research
  priorityClass: high
  gpusPerReplica: $gpus
  $env_line
  command: [$python, $work/matmul.py]
EOF
reconcile_until "out_has urgent 'devices $gpus'" || fail "urgent did not run: $(cat "$state/local/urgent/0.err" 2>/dev/null)"
grep -q "SIGTERM: checkpointed and freed" "$state/local/hold/0.out" || fail "hold was not signalled"
# Once urgent is done, the loop places hold again.
reconcile_until '[ "$(grep -c holding "$state/local/hold/0.out")" -ge 2 ]' || fail "hold was not placed again"
cp "$state/local/hold/0.out" "$out/hold.out"
cp "$state/local/urgent/0.out" "$out/urgent.out"
ok "preemption: hold got SIGTERM and freed its memory; urgent ran ($(cat "$state/local/urgent/0.out"))"

# 5. hold was placed again once urgent was done; removing it from the fleet
# cancels it (SIGTERM) and leaves the GPUs empty.
python3 - "$fleet/jobs.yaml" <<'PY'
import sys
path = sys.argv[1]
docs = open(path).read().split("---\n")
open(path, "w").write("---\n".join(d for d in docs if "name: hold}" not in d))
PY
cancelled() {
    "$bin" status --state "$state" >"$out/status.txt" 2>&1 || true
    grep -q "removed from Git" "$out/status.txt" && ! grep -q "hold .*running" "$out/status.txt"
}
reconcile_until cancelled || fail "hold was not cancelled: $(cat "$out/status.txt")"
sleep 2
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader >"$out/compute-apps-after.txt"
[ ! -s "$out/compute-apps-after.txt" ] || fail "processes left on the GPU: $(cat "$out/compute-apps-after.txt")"
ok "no process left on the GPU"
echo "all checks passed" | tee -a "$out/summary.txt"
