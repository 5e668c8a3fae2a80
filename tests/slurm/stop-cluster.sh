#!/usr/bin/env bash
# Stops what tests/slurm/start-cluster.sh DIR started (by the pid files under
# DIR/run), and waits until each process is gone.
set -uo pipefail
dir=${1:?usage: stop-cluster.sh DIR}
for name in slurmd-gpu-1 slurmd-gpu-2 slurmd-gpu-3 slurmctld slurmdbd mariadb munged; do
  file=$dir/run/$name.pid
  [ -f "$file" ] || continue
  pid=$(cat "$file")
  [ -n "$pid" ] || continue
  kill "$pid" 2>/dev/null || continue
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
done
exit 0
