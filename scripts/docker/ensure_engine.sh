#!/usr/bin/env bash
# Make sure a Docker engine answers `docker info`; install and start one if not.
#
# - If `docker info` already works: exit 0 at once.
# - Else install Debian's engine (docker.io + containerd + runc + iptables + tini)
#   with apt, never removing a package (apt-get --no-remove), never letting the
#   package's init script start a daemon of its own (temporary policy-rc.d).
# - Start dockerd: `systemctl start docker` where systemd runs, else in the
#   background (setsid), log in $AOTI_GUARD_DOCKERD_LOG, pidfile /var/run/docker.pid.
#   Default flags: no bridge, no iptables, no ip_forward/masquerade changes on
#   the host (our containers run with --network none); see containers/base/NOTES.md.
# - Wait (bounded) until `docker info` answers; on failure print the log's tail.
#
# Environment (all optional):
#   AOTI_GUARD_DOCKERD_LOG        log file   (default /var/log/aoti-guard/dockerd.log)
#   AOTI_GUARD_DOCKERD_WAIT_S     seconds to wait for the engine (default 60)
#   AOTI_GUARD_DOCKER_STORAGE_DRIVER  force a storage driver (overlay2, fuse-overlayfs, vfs)
#   AOTI_GUARD_DOCKER_DATA_ROOT   --data-root (default: dockerd's, /var/lib/docker)
#   AOTI_GUARD_DOCKERD_NETWORK=1  keep dockerd's default bridge + iptables set-up
#   AOTI_GUARD_DOCKERD_EXTRA_ARGS extra dockerd arguments (word-split)
set -euo pipefail

T0=$(date +%s.%N)
el() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
say() { echo "[ensure_engine +$(el "$T0")s] $*"; }
die() { echo "[ensure_engine] ERROR: $*" >&2; exit 1; }

SOCK=/var/run/docker.sock
PIDFILE=/var/run/docker.pid
LOG=${AOTI_GUARD_DOCKERD_LOG:-/var/log/aoti-guard/dockerd.log}
WAIT_S=${AOTI_GUARD_DOCKERD_WAIT_S:-60}

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || die "not root and no sudo: cannot install/start dockerd"
  SUDO=(sudo -n)
fi

engine_up() { timeout 20 docker info >/dev/null 2>&1; }

if command -v docker >/dev/null 2>&1 && engine_up; then
  say "engine already answers: $(docker info --format '{{.ServerVersion}} driver={{.Driver}}' 2>/dev/null)"
  exit 0
fi

if [ -n "${DOCKER_HOST:-}" ] && [ "$DOCKER_HOST" != "unix://$SOCK" ]; then
  say "WARNING: DOCKER_HOST=$DOCKER_HOST does not answer; starting a local engine on unix://$SOCK" \
      "and using it for this script (unset DOCKER_HOST for your own commands)"
  export DOCKER_HOST="unix://$SOCK"
fi

# ---------------------------------------------------------------- install
if ! command -v dockerd >/dev/null 2>&1 || ! command -v containerd >/dev/null 2>&1 \
   || ! command -v runc >/dev/null 2>&1; then
  T1=$(date +%s.%N)
  command -v apt-get >/dev/null 2>&1 || die "no dockerd and no apt-get: install a Docker engine by hand"
  for p in docker-ce docker-ce-cli moby-engine; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
      die "package $p is installed and conflicts with Debian's docker.io; install its engine (docker-ce/containerd.io) instead"
    fi
  done
  # The Docker CLI on these machines is a bare binary in /usr/local/bin (no dpkg
  # package), so docker.io (which also ships /usr/bin/docker) does not conflict.
  POLICY=/usr/sbin/policy-rc.d
  POLICY_ADDED=0
  if [ ! -e "$POLICY" ]; then
    # keep the package's init script from starting a daemon with default flags
    printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$POLICY" >/dev/null
    "${SUDO[@]}" chmod 755 "$POLICY"
    POLICY_ADDED=1
  fi
  trap '[ "${POLICY_ADDED:-0}" = 1 ] && "${SUDO[@]}" rm -f /usr/sbin/policy-rc.d' EXIT
  PKGS=(docker.io containerd runc iptables tini)
  export DEBIAN_FRONTEND=noninteractive
  say "installing ${PKGS[*]} from Debian"
  if ! "${SUDO[@]}" apt-get install -y -q --no-install-recommends --no-remove "${PKGS[@]}" >/tmp/aoti-guard-apt.log 2>&1; then
    say "apt-get install failed; running apt-get update and retrying"
    "${SUDO[@]}" apt-get update -q >>/tmp/aoti-guard-apt.log 2>&1 || true
    "${SUDO[@]}" apt-get install -y -q --no-install-recommends --no-remove "${PKGS[@]}" >>/tmp/aoti-guard-apt.log 2>&1 \
      || { tail -n 30 /tmp/aoti-guard-apt.log >&2; die "apt-get install ${PKGS[*]} failed (log: /tmp/aoti-guard-apt.log)"; }
  fi
  if [ "$POLICY_ADDED" = 1 ]; then "${SUDO[@]}" rm -f "$POLICY"; POLICY_ADDED=0; fi
  say "installed $(dockerd --version) in $(el "$T1")s"
fi
command -v docker >/dev/null 2>&1 || die "docker CLI missing even after installing docker.io"

# ---------------------------------------------------------------- start
# alive = exists, is a dockerd, and is not a zombie (PID 1 here may reap late:
# a SIGKILLed dockerd stayed in /proc as a zombie for a while)
alive_dockerd() {
  local st
  [ -n "${1:-}" ] && [ "$(cat /proc/"$1"/comm 2>/dev/null)" = dockerd ] || return 1
  st=$(awk '{print $3}' /proc/"$1"/stat 2>/dev/null) || return 1
  [ "$st" != Z ] && [ "$st" != X ]
}
wait_engine() {  # seconds [pid-to-watch] -> 0 up, 1 timeout, 2 dockerd died
  # the watched pid may be sudo/setsid rather than dockerd itself: dockerd
  # counts as dead only when neither it nor the pidfile's pid is a live
  # dockerd, 3 s after the start
  local start deadline pid=${2:-}
  start=$(date +%s); deadline=$(( start + $1 ))
  until engine_up; do
    if [ -n "$pid" ] && [ $(( $(date +%s) - start )) -ge 3 ] && ! alive_dockerd "$pid" \
       && ! alive_dockerd "$(cat "$PIDFILE" 2>/dev/null || true)"; then
      return 2
    fi
    [ "$(date +%s)" -ge "$deadline" ] && return 1
    sleep 0.5
  done
  return 0
}
fail_with_log() {
  echo "----- last 40 lines of $LOG -----" >&2
  tail -n 40 "$LOG" >&2 || true
  die "$*"
}

T2=$(date +%s.%N)
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  say "systemd present: systemctl start docker"
  "${SUDO[@]}" systemctl start docker || die "systemctl start docker failed: $(journalctl -u docker -n 20 --no-pager 2>&1)"
  wait_engine "$WAIT_S" || die "docker.service started but 'docker info' did not answer within ${WAIT_S}s"
else
  if [ -f "$PIDFILE" ]; then
    old=$(cat "$PIDFILE" 2>/dev/null || true)
    if alive_dockerd "$old"; then
      # a dockerd is there but not answering: maybe still starting; else replace it
      say "dockerd pid $old is running but not answering; giving it 15s"
      rc=0; wait_engine 15 "$old" || rc=$?
      if [ "$rc" -eq 0 ]; then
        say "engine up (pid $old): $(docker info --format 'server {{.ServerVersion}}, driver {{.Driver}}')"; exit 0
      fi
      if alive_dockerd "$old"; then
        say "stopping unresponsive dockerd pid $old"
        "${SUDO[@]}" kill "$old" 2>/dev/null || true
        for _ in $(seq 1 20); do alive_dockerd "$old" || break; sleep 0.5; done
        alive_dockerd "$old" && { "${SUDO[@]}" kill -9 "$old" 2>/dev/null || true; sleep 1; }
      fi
    fi
    if [ -f "$PIDFILE" ] && ! alive_dockerd "$(cat "$PIDFILE" 2>/dev/null || true)"; then
      say "removing stale $PIDFILE (pid '$(cat "$PIDFILE" 2>/dev/null || true)' is not a live dockerd)"
      "${SUDO[@]}" rm -f "$PIDFILE"
    fi
  fi
  # dockerd's managed containerd: a stale pidfile whose pid is a zombie makes
  # dockerd believe "containerd is still running", wait for its socket and exit
  # with "failed to start containerd: timeout waiting for containerd to start"
  CPIDFILE=/var/run/docker/containerd/containerd.pid
  if [ -f "$CPIDFILE" ]; then
    cpid=$(cat "$CPIDFILE" 2>/dev/null || true)
    cst=$(awk '{print $3}' /proc/"$cpid"/stat 2>/dev/null || true)
    if [ -z "$cpid" ] || [ "$(cat /proc/"$cpid"/comm 2>/dev/null)" != containerd ] || [ "$cst" = Z ] || [ "$cst" = X ]; then
      say "removing stale $CPIDFILE (pid '$cpid' is not a live containerd)"
      "${SUDO[@]}" rm -f "$CPIDFILE"
    fi
  fi
  ARGS=(--pidfile "$PIDFILE" -H "unix://$SOCK")
  if [ "${AOTI_GUARD_DOCKERD_NETWORK:-0}" != 1 ]; then
    # no docker0 bridge, no iptables rules (dockerd otherwise sets the FORWARD
    # policy to DROP), no net.ipv4.ip_forward=1: containers get lo only
    ARGS+=(--bridge=none --iptables=false --ip-forward=false --ip-masq=false)
  fi
  DATA_ROOT=${AOTI_GUARD_DOCKER_DATA_ROOT:-/var/lib/docker}
  [ -n "${AOTI_GUARD_DOCKER_DATA_ROOT:-}" ] && ARGS+=(--data-root "$DATA_ROOT")
  DRIVER=${AOTI_GUARD_DOCKER_STORAGE_DRIVER:-}
  if [ -z "$DRIVER" ]; then
    # overlay2 cannot sit on an overlay filesystem (docker-in-docker); dockerd
    # would then fall back to vfs (copies every layer: slow, GBs for torch)
    "${SUDO[@]}" mkdir -p "$DATA_ROOT"
    if [ "$(stat -f -c %T "$DATA_ROOT")" = overlayfs ] && [ -e /dev/fuse ]; then
      DRIVER=fuse-overlayfs
    fi
  fi
  if [ -n "$DRIVER" ]; then
    if [ "$DRIVER" = fuse-overlayfs ] && ! command -v fuse-overlayfs >/dev/null 2>&1; then
      "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends --no-remove fuse-overlayfs >>/tmp/aoti-guard-apt.log 2>&1 \
        || die "apt-get install fuse-overlayfs failed (log: /tmp/aoti-guard-apt.log)"
    fi
    ARGS+=(--storage-driver "$DRIVER")
  fi
  # shellcheck disable=SC2206
  [ -n "${AOTI_GUARD_DOCKERD_EXTRA_ARGS:-}" ] && ARGS+=(${AOTI_GUARD_DOCKERD_EXTRA_ARGS})
  "${SUDO[@]}" mkdir -p "$(dirname "$LOG")"
  echo "=== $(date -u +%FT%TZ) ensure_engine.sh: dockerd ${ARGS[*]}" | "${SUDO[@]}" tee -a "$LOG" >/dev/null
  say "starting dockerd ${ARGS[*]} (log: $LOG)"
  # setsid: own session, so it outlives this script and its process group
  "${SUDO[@]}" setsid nohup dockerd "${ARGS[@]}" </dev/null >>"$LOG" 2>&1 &
  LAUNCHER=$!
  rc=0; wait_engine "$WAIT_S" "$LAUNCHER" || rc=$?
  [ "$rc" -eq 2 ] && fail_with_log "dockerd exited during start-up (log: $LOG)"
  [ "$rc" -ne 0 ] && fail_with_log "Docker engine did not answer 'docker info' within ${WAIT_S}s (log: $LOG)"
fi
say "engine up in $(el "$T2")s: $(docker info --format 'server {{.ServerVersion}}, driver {{.Driver}}, cgroup v{{.CgroupVersion}} ({{.CgroupDriver}}), root {{.DockerRootDir}}')"
say "dockerd pid $(cat "$PIDFILE" 2>/dev/null || echo '?'); socket $SOCK; total $(el "$T0")s"
