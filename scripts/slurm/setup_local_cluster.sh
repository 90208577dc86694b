#!/usr/bin/env bash
# A one-node Slurm cluster on this host, for the `slurm` tests (tests/integration/test_fleet_slurm.py)
# and for trying `aoti-guard fleet slurm --submit` by hand.
#
# - Installs Debian's munge, slurmctld, slurmd and slurm-client with apt when sbatch/slurmd/munged
#   are missing (never removing a package; the packages' init scripts are not allowed to start
#   daemons of their own: a temporary policy-rc.d).
# - Writes /etc/slurm/slurm.conf for THIS host (its short hostname, its CPUs and memory as
#   `slurmd -C` reads them, Features=aoti-cpu so --constraint can be tried), with proctrack/linuxproc
#   and task/none: no cgroup or systemd needed, so it runs in a container too.
# - Starts munged, slurmctld and slurmd (in the background, logs under $AOTI_GUARD_SLURM_LOG_DIR)
#   unless they already run, then waits (bounded) until `sinfo` shows the node idle.
# - Idempotent and quick: a second run on a running cluster only checks `sinfo` (~0.1 s); a run
#   whose slurm.conf differs restarts the daemons.
#
# Environment (all optional):
#   AOTI_GUARD_SLURM_LOG_DIR   logs of the three daemons (default /var/log/aoti-guard/slurm)
#   AOTI_GUARD_SLURM_WAIT_S    seconds to wait for the node to be idle (default 60)
set -euo pipefail

T0=$(date +%s.%N)
el() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
say() { echo "[slurm +$(el "$T0")s] $*"; }
die() { echo "[slurm] ERROR: $*" >&2; exit 1; }

LOG_DIR=${AOTI_GUARD_SLURM_LOG_DIR:-/var/log/aoti-guard/slurm}
WAIT_S=${AOTI_GUARD_SLURM_WAIT_S:-60}
CONF=/etc/slurm/slurm.conf
NODE=$(hostname -s)

[ "$(id -u)" -eq 0 ] || die "run as root (it installs packages and starts munged/slurmctld/slurmd)"

node_idle() { timeout 10 sinfo -h -N -n "$NODE" -o '%T' 2>/dev/null | grep -Eq '^(idle|mixed|allocated)'; }

# ---------------------------------------------------------------- install
if ! command -v sbatch >/dev/null || ! command -v slurmd >/dev/null || ! command -v slurmctld >/dev/null \
   || ! command -v munged >/dev/null; then
  command -v apt-get >/dev/null || die "no Slurm and no apt-get: install munge, slurmctld, slurmd and slurm-client by hand"
  say "installing munge slurmctld slurmd slurm-client (apt)"
  policy=/usr/sbin/policy-rc.d
  had_policy=0; [ -e "$policy" ] && had_policy=1
  if [ "$had_policy" -eq 0 ]; then printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends --no-remove munge slurmctld slurmd slurm-client >/dev/null
  if [ "$had_policy" -eq 0 ]; then rm -f "$policy"; fi
fi

# ---------------------------------------------------------------- configure
mkdir -p /etc/slurm /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /run/munge "$LOG_DIR"
# `slurmd -C` prints this host's line: NodeName=... CPUs=... RealMemory=...; keep only the
# hardware fields slurm.conf takes (UpTime is not one of them)
hw=$(slurmd -C 2>/dev/null | head -1 | tr ' ' '\n' | grep -E '^(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore|RealMemory)=' | tr '\n' ' ')
[ -n "$hw" ] || die "slurmd -C printed no hardware line"
conf=$(cat <<EOF
# written by scripts/slurm/setup_local_cluster.sh: a one-node cluster for tests (no cgroups)
ClusterName=aoti-guard
SlurmctldHost=$NODE
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
KillWait=10
Waittime=0
NodeName=$NODE ${hw}Features=aoti-cpu State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
)
changed=0
if [ ! -f "$CONF" ] || [ "$(cat "$CONF")" != "$conf" ]; then
  printf '%s\n' "$conf" >"$CONF"
  changed=1
  say "wrote $CONF for node $NODE (${hw% })"
fi

if [ "$changed" -eq 0 ] && node_idle; then
  say "cluster already up: $(sinfo -h -N -o '%N %T %f' | head -1)"
  exit 0
fi

# ---------------------------------------------------------------- start
running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
stop() {  # the daemon this script started (its pidfile), never a broad name
  if running "$1"; then kill "$(cat "$1")"; for _ in $(seq 50); do running "$1" || break; sleep 0.1; done; fi
}

if [ ! -s /etc/munge/munge.key ]; then
  say "creating /etc/munge/munge.key"
  if command -v mungekey >/dev/null; then mungekey --create --keyfile=/etc/munge/munge.key; else
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none; fi
fi
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
chmod 0400 /etc/munge/munge.key
MUNGE_PID=/run/munge/munged.pid
if ! running "$MUNGE_PID"; then
  say "starting munged"
  runuser -u munge -- munged --pid-file="$MUNGE_PID" 2>>"$LOG_DIR/munged.err" || munged --force --pid-file="$MUNGE_PID"
fi
munge -n | unmunge >/dev/null || die "munge does not round-trip a credential (see $LOG_DIR/munged.err)"

if [ "$changed" -eq 1 ]; then stop /run/slurmd.pid; stop /run/slurmctld.pid; fi
if ! running /run/slurmctld.pid; then
  say "starting slurmctld"
  slurmctld -i >>"$LOG_DIR/slurmctld.out" 2>&1
fi
if ! running /run/slurmd.pid; then
  say "starting slurmd"
  slurmd >>"$LOG_DIR/slurmd.out" 2>&1
fi

deadline=$(( $(date +%s) + WAIT_S ))
until node_idle; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    sinfo -N -l >&2 || true
    tail -n 20 "$LOG_DIR/slurmctld.log" "$LOG_DIR/slurmd.log" >&2 || true
    die "node $NODE not idle after ${WAIT_S}s (logs: $LOG_DIR)"
  fi
  # a node left DOWN/DRAIN by an earlier run (a prolog that failed it) comes back here
  state=$(sinfo -h -N -n "$NODE" -o '%T' 2>/dev/null || true)
  case "$state" in down*|drain*|fail*) scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true ;; esac
  sleep 0.5
done
say "cluster up: $(sinfo -h -N -o '%N %T %f' | head -1)"
