#!/usr/bin/env bash
# Stops what tests/slurm/start-cluster.sh DIR started (by the pid files under
# DIR/run), and waits until each process is gone: first every job (scancel),
# then every slurmd (all signalled, then waited for), then slurmrestd,
# slurmctld, slurmdbd, MariaDB, munged.
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
# Jobs first: a job step (slurmstepd and its tasks) outlives the slurmd
# that started it, so cancel every job while slurmctld still runs and give
# the steps a few seconds to end.
if [ -f "$dir/slurm.conf" ] && [ -f "$dir/run/slurmctld.pid" ] &&
  kill -0 "$(cat "$dir/run/slurmctld.pid")" 2>/dev/null; then
  export SLURM_CONF=$dir/slurm.conf
  timeout 10 scancel --user="$(id -un)" 2>/dev/null || true
  for _ in $(seq 1 50); do
    [ -z "$(timeout 5 squeue -h 2>/dev/null)" ] && break
    sleep 0.2
  done
fi
stop "$dir"/run/slurmd-*.pid
for name in slurmrestd slurmrestd-jwt slurmctld slurmdbd mariadb munged; do stop "$dir/run/$name.pid"; done
exit 0
