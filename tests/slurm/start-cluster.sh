#!/usr/bin/env bash
# Starts a throw-away Slurm cluster on loopback for gitfleet's tests, as
# root: its own munged, MariaDB, slurmdbd, slurmctld and slurmd, all under
# DIR with their own sockets and ports, so two test runs never meet.
#
#   tests/slurm/start-cluster.sh DIR      # prints `export SLURM_CONF=…` lines
#   tests/slurm/stop-cluster.sh DIR
#
# Nodes: gpu-1 and gpu-2 with 8 H100 (gres type h100-sxm-80gb), gpu-3 with 8
# A100 (a100-sxm4-80gb), their GPUs files under DIR/dev (Slurm only needs
# them to exist). One slurmd per node (`slurmd -N gpu-N`), each on a port of
# its own.
#
# GITFLEET_SLURM_NODES=N instead declares N nodes gpu-1 … gpu-N, each with 8
# H100, in racks of 8 (topology/tree: one leaf switch per 8 nodes), for
# tests/slurm/compare-burst.sh (512 nodes, still one slurmd each).
# Installs the Debian packages when they are missing (apt-get, root only).
# slurmrestd (when installed) listens on DIR/run/slurmrestd.sock
# (rest_auth/local) and, with the JWT plugin, on the TCP address in
# DIR/run/slurmrestd-jwt.url (rest_auth/jwt).
set -euo pipefail

dir=${1:?usage: start-cluster.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

need=(slurmctld slurmd slurmdbd sacctmgr munged mariadbd)
missing=0
for tool in "${need[@]}"; do
  PATH=$PATH:/usr/sbin command -v "$tool" >/dev/null 2>&1 || missing=1
done
if [ "$missing" = 1 ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "start-cluster: Slurm is not installed and apt-get cannot run here" >&2
    exit 3
  fi
  export DEBIAN_FRONTEND=noninteractive
  pkgs=(slurmctld slurmd slurmdbd slurm-client munge mariadb-server)
  apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/dev/null \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/dev/null; }
fi
export PATH=$PATH:/usr/sbin
# slurmrestd and the JWT plugins are optional: the clusters run without
# them (and the slurmrestd test skips) where they cannot be installed.
jwt_plugin() { ls /usr/lib/*/slurm-wlm/auth_jwt.so >/dev/null 2>&1; }
if { ! command -v slurmrestd >/dev/null 2>&1 || ! jwt_plugin; } && [ "$(id -u)" = 0 ] &&
  command -v apt-get >/dev/null 2>&1; then
  rest_pkgs=(slurmrestd slurm-wlm-jwt-plugin)
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${rest_pkgs[@]}" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${rest_pkgs[@]}" >/dev/null 2>&1; } \
    || echo "start-cluster: slurmrestd could not be installed; starting without it" >&2
fi

burst=${GITFLEET_SLURM_NODES:-0}
nodes=3
[ "$burst" -gt 0 ] && nodes=$burst

# Free ports in a row: slurmctld, slurmdbd, MariaDB, one per slurmd, then
# slurmrestd's TCP port (JWT).
in_use() { (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
base=0
for _ in $(seq 1 50); do
  candidate=$((20000 + (RANDOM % 2000) * 10))
  [ $((candidate + nodes + 4)) -lt 32000 ] || continue
  ok=1
  for p in $(seq 0 $((nodes + 3))); do in_use $((candidate + p)) && ok=0; done
  if [ "$ok" = 1 ]; then base=$candidate; break; fi
done
[ "$base" != 0 ] || { echo "start-cluster: no free ports" >&2; exit 1; }
ctld_port=$base; dbd_port=$((base + 1)); db_port=$((base + 2))
rest_port=$((base + nodes + 3))

mkdir -p "$dir"/{munge,db,log,spool/ctld,spool/d,run,dev}
echo "$base" > "$dir/ports"

# munge: a key of our own, a socket of our own.
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/munge.key"
munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" \
  --seed-file="$dir/munge/seed" --force

# MariaDB: a data directory of our own, no grant tables (loopback, tests only).
# Its own tmpdir: parallel bootstraps in one /tmp collide on temporary tables.
mkdir -p "$dir/tmp"
cat > "$dir/my.cnf" <<CONF
[mysqld]
user=root
datadir=$dir/db
tmpdir=$dir/tmp
socket=$dir/run/mysql.sock
port=$db_port
bind-address=127.0.0.1
skip-grant-tables
pid-file=$dir/run/mariadb.pid
log-error=$dir/log/mariadb.log
innodb-buffer-pool-size=32M
innodb-log-file-size=16M
CONF
if ! mariadb-install-db --defaults-file="$dir/my.cnf" --auth-root-authentication-method=normal \
  --skip-test-db >"$dir/log/mariadb-install.log" 2>&1; then
  echo "start-cluster: mariadb-install-db failed:" >&2
  head -n 5 "$dir/log/mariadb-install.log" >&2
  exit 1
fi
mariadbd --defaults-file="$dir/my.cnf" >/dev/null 2>&1 &

for i in 0 1 2 3 4 5 6 7; do
  touch "$dir/dev/h100-$i" "$dir/dev/a100-$i"
done

cat > "$dir/slurmdbd.conf" <<CONF
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$dbd_port
SlurmUser=root
LogFile=$dir/log/slurmdbd.log
PidFile=$dir/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=root
StorageLoc=slurm_acct
CONF
# JWT as the alternative authentication (slurmrestd over TCP, `scontrol
# token`), where the plugin is installed: the same key for both daemons.
if jwt_plugin; then
  dd if=/dev/urandom of="$dir/jwt.key" bs=32 count=1 status=none
  chmod 600 "$dir/jwt.key"
  printf 'AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key=%s\n' "$dir/jwt.key" >>"$dir/slurmdbd.conf"
fi
chmod 600 "$dir/slurmdbd.conf"

cat > "$dir/slurm.conf" <<CONF
ClusterName=gitfleet
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/spool/ctld
SlurmdSpoolDir=$dir/spool/d/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$dbd_port
AccountingStoragePass=$dir/munge/munge.socket
AccountingStorageTRES=gres/gpu,gres/gpu:h100-sxm-80gb,gres/gpu:a100-sxm4-80gb
AccountingStorageEnforce=associations,limits,qos
PriorityType=priority/multifactor
PriorityWeightFairshare=10000
PriorityWeightQOS=10000
PreemptType=preempt/qos
PreemptMode=REQUEUE
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
CONF
if jwt_plugin; then
  printf 'AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key=%s\n' "$dir/jwt.key" >>"$dir/slurm.conf"
fi
if [ "$burst" -gt 0 ]; then
  for i in $(seq 1 "$burst"); do
    echo "NodeName=gpu-$i NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((base + 2 + i)) CPUs=8 RealMemory=8000 Gres=gpu:h100-sxm-80gb:8 State=UNKNOWN"
  done >> "$dir/slurm.conf"
  echo "PartitionName=gpu Nodes=gpu-[1-$burst] Default=YES MaxTime=INFINITE State=UP" >> "$dir/slurm.conf"
  cat > "$dir/gres.conf" <<CONF
AutoDetect=off
NodeName=gpu-[1-$burst] Name=gpu Type=h100-sxm-80gb File=$dir/dev/h100-[0-7]
CONF
  echo "TopologyPlugin=topology/tree" >> "$dir/slurm.conf"
  racks=$(((burst + 7) / 8))
  for r in $(seq 1 "$racks"); do
    last=$((r * 8)); [ "$last" -le "$burst" ] || last=$burst
    echo "SwitchName=rack-$r Nodes=gpu-[$((r * 8 - 7))-$last]"
  done > "$dir/topology.conf"
  echo "SwitchName=top Switches=rack-[1-$racks]" >> "$dir/topology.conf"
else
  cat >> "$dir/slurm.conf" <<CONF
NodeName=gpu-1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((base + 3)) CPUs=8 RealMemory=8000 Gres=gpu:h100-sxm-80gb:8 State=UNKNOWN
NodeName=gpu-2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((base + 4)) CPUs=8 RealMemory=8000 Gres=gpu:h100-sxm-80gb:8 State=UNKNOWN
NodeName=gpu-3 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((base + 5)) CPUs=8 RealMemory=8000 Gres=gpu:a100-sxm4-80gb:8 State=UNKNOWN
PartitionName=gpu Nodes=gpu-[1-3] Default=YES MaxTime=INFINITE State=UP
CONF
  cat > "$dir/gres.conf" <<CONF
AutoDetect=off
NodeName=gpu-[1-2] Name=gpu Type=h100-sxm-80gb File=$dir/dev/h100-[0-7]
NodeName=gpu-3 Name=gpu Type=a100-sxm4-80gb File=$dir/dev/a100-[0-7]
CONF
fi

export SLURM_CONF=$dir/slurm.conf

# Wait for MariaDB, then slurmdbd.
for _ in $(seq 1 100); do in_use "$db_port" && break; sleep 0.1; done
in_use "$db_port" || { echo "start-cluster: MariaDB did not start (see $dir/log/mariadb.log)" >&2; exit 1; }
slurmdbd
for _ in $(seq 1 100); do in_use "$dbd_port" && break; sleep 0.1; done
in_use "$dbd_port" || { echo "start-cluster: slurmdbd did not start (see $dir/log/slurmdbd.log)" >&2; exit 1; }

# The cluster must exist in the database before slurmctld registers.
sacctmgr -i add cluster gitfleet >/dev/null

slurmctld -f "$dir/slurm.conf"
for _ in $(seq 1 100); do in_use "$ctld_port" && break; sleep 0.1; done
for i in $(seq 1 "$nodes"); do slurmd -N "gpu-$i"; done

for _ in $(seq 1 $((300 + nodes))); do
  idle=$(sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 == "idle"' | sort -u | wc -l)
  [ "$idle" -ge "$nodes" ] && break
  sleep 0.1
done
if [ "$idle" -lt "$nodes" ]; then
  echo "start-cluster: nodes not idle: $(sinfo -h -N -o '%N %t %E' 2>&1 | tr '\n' ';') (see $dir/log)" >&2
  exit 1
fi

# slurmrestd on a Unix socket with rest_auth/local (the caller's uid is the
# user; root is accepted). It refuses to run as root or SlurmUser (both root
# here) unless SLURMRESTD_SECURITY=disable_user_check: a dedicated user
# would need the munge socket and slurm.conf under DIR (a 0700 temporary
# directory) and SlurmUser root. It does not daemonize: its pid is $!.
if command -v slurmrestd >/dev/null 2>&1; then
  sock=$dir/run/slurmrestd.sock
  SLURMRESTD_SECURITY=disable_user_check setsid slurmrestd -f "$dir/slurm.conf" \
    -a rest_auth/local -s openapi/v0.0.38,openapi/dbv0.0.38 "unix:$sock" \
    >"$dir/log/slurmrestd.log" 2>&1 </dev/null &
  echo $! >"$dir/run/slurmrestd.pid"
  for _ in $(seq 1 100); do [ -S "$sock" ] && break; sleep 0.1; done
  [ -S "$sock" ] || { echo "start-cluster: slurmrestd did not start (see $dir/log/slurmrestd.log)" >&2; exit 1; }
  echo "# slurmrestd: unix:$sock"
  # A second one on TCP with rest_auth/jwt: SLURM_JWT=daemon makes it
  # pass each request's token on (and so no longer serve rest_auth/local).
  if jwt_plugin; then
    SLURM_JWT=daemon SLURMRESTD_SECURITY=disable_user_check setsid slurmrestd -f "$dir/slurm.conf" \
      -a rest_auth/jwt -s openapi/v0.0.38,openapi/dbv0.0.38 "127.0.0.1:$rest_port" \
      >"$dir/log/slurmrestd-jwt.log" 2>&1 </dev/null &
    echo $! >"$dir/run/slurmrestd-jwt.pid"
    for _ in $(seq 1 100); do in_use "$rest_port" && break; sleep 0.1; done
    in_use "$rest_port" || { echo "start-cluster: slurmrestd (JWT) did not start (see $dir/log/slurmrestd-jwt.log)" >&2; exit 1; }
    echo "http://127.0.0.1:$rest_port" >"$dir/run/slurmrestd-jwt.url"
    echo "# slurmrestd (JWT, token: scontrol token): http://127.0.0.1:$rest_port"
  fi
fi
echo "export SLURM_CONF=$dir/slurm.conf"
