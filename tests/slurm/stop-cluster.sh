#!/usr/bin/env bash
# Stops what tests/slurm/start-cluster.sh DIR started (by the pid files under
# DIR/run), and waits until each process is gone: first every slurmd (all
# signalled, then waited for), then slurmctld, slurmdbd, MariaDB, munged.
set -uo pipefail
dir=${1:?usage: stop-cluster.sh DIR}
stop() {
  local pids=() file pid
  for file in "$@"; do
    [ -f "$file" ] || continue
    pid=$(cat "$file")
    [ -n "$pid" ] || continue
    kill "$pid" 2>/dev/null && pids+=("$pid")
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
}
stop "$dir"/run/slurmd-*.pid
for name in slurmctld slurmdbd mariadb munged; do stop "$dir/run/$name.pid"; done
exit 0
