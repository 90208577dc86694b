#!/usr/bin/env bash
# Build the local test images for aoti-guard's container probe, with no image
# registry (none is reachable here):
#
#   aoti-guard/base:bookworm-py311     debootstrap minbase bookworm + python3 (3.11),
#                                      python3-venv, libgomp1, libstdc++6; NO torch
#   aoti-guard/torch:2.13.0-cpu-py311  base + /opt/venv with torch 2.13.0+cpu (first on PATH)
#   aoti-guard/notorch:bookworm-py311  base + empty /opt/venv first on PATH (lacks torch)
#
# Idempotent: an image is skipped when it exists with the same recipe label
# (aoti-guard.recipe); the stripped debootstrap rootfs is cached as a tarball in
# $AOTI_GUARD_CACHE/rootfs and the wheels in $AOTI_GUARD_CACHE/wheels.
#
# Environment (all optional):
#   AOTI_GUARD_CACHE          cache dir (default $HOME/.cache/aoti-guard)
#   AOTI_GUARD_DEBIAN_MIRROR  Debian mirror URL (default: read from /etc/apt/sources.list*)
#   AOTI_GUARD_REBUILD=1      rebuild all three images (still uses the cached rootfs tarball)
#   AOTI_GUARD_SKIP_TORCH=1   build only base and notorch
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CTR_DIR=$REPO/containers/base

SUITE=bookworm
BASE_TAG=aoti-guard/base:bookworm-py311
TORCH_TAG=aoti-guard/torch:2.13.0-cpu-py311
NOTORCH_TAG=aoti-guard/notorch:bookworm-py311
INCLUDE=python3,python3-venv,libgomp1,libstdc++6,ca-certificates
# paths removed from the rootfs (relative); bump ROOTFS_RECIPE_VERSION when changing the recipe
STRIP=(var/lib/apt/lists var/cache/apt usr/share/doc usr/share/man usr/share/info
       usr/share/locale usr/share/i18n usr/share/lintian usr/share/linda var/log)
ROOTFS_RECIPE_VERSION=1
CACHE=${AOTI_GUARD_CACHE:-${HOME:-/root}/.cache/aoti-guard}
export DOCKER_BUILDKIT=0   # Debian has no buildx for bookworm; BuildKit=1 would make `docker build` fail

T0=$(date +%s.%N)
el() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
say() { echo "[build_base_image +$(el "$T0")s] $*"; }
die() { echo "[build_base_image] ERROR: $*" >&2; exit 1; }

SUDO=()
[ "$(id -u)" -ne 0 ] && SUDO=(sudo -n)

"$HERE/ensure_engine.sh"

sha() { sha256sum | cut -c1-16; }
img_label() { docker image inspect --format "{{ index .Config.Labels \"$2\" }}" "$1" 2>/dev/null || true; }
img_exists_with_recipe() { [ "$(img_label "$1" aoti-guard.recipe)" = "$2" ]; }

# ---------------------------------------------------------------- mirror
# The first enabled `deb` source for suite $SUITE (deb822 *.sources or one-line
# *.list). Never hard-coded: CI machines may point at a different mirror.
find_mirror() {
  local f m
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    m=$(awk -v RS= -v cn="$SUITE" '{
          uris = ""; suites = ""; types = ""; enabled = "yes"
          n = split($0, L, "\n")
          for (i = 1; i <= n; i++) {
            l = L[i]; if (l ~ /^[ \t]*#/) continue
            if (l ~ /^URIs:/)         { sub(/^URIs:[ \t]*/, "", l); uris = l }
            else if (l ~ /^Suites:/)  { sub(/^Suites:[ \t]*/, "", l); suites = " " l " " }
            else if (l ~ /^Types:/)   { sub(/^Types:[ \t]*/, "", l); types = " " l " " }
            else if (l ~ /^Enabled:/) { sub(/^Enabled:[ \t]*/, "", l); enabled = tolower(l) }
          }
          if (types ~ / deb / && enabled != "no" && suites ~ (" " cn " ")) { split(uris, U, " "); print U[1]; exit }
        }' "$f")
    [ -n "$m" ] && { echo "$m"; return 0; }
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    m=$(awk -v cn="$SUITE" '$1 == "deb" {
          i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
          if ($(i + 1) == cn) { print $i; exit } }' "$f")
    [ -n "$m" ] && { echo "$m"; return 0; }
  done
  return 1
}

# ---------------------------------------------------------------- base image
ROOTFS_KEY=$(printf '%s\n' "$SUITE" "$INCLUDE" "${STRIP[*]}" "$ROOTFS_RECIPE_VERSION" "$(uname -m)" | sha)
ROOTFS_TAR=$CACHE/rootfs/$SUITE-minbase-py3-$ROOTFS_KEY.tar
BASE_RECIPE=rootfs-$ROOTFS_KEY

if [ "${AOTI_GUARD_REBUILD:-0}" != 1 ] && img_exists_with_recipe "$BASE_TAG" "$BASE_RECIPE"; then
  say "$BASE_TAG exists (recipe $BASE_RECIPE): skipped"
else
  if [ -f "$ROOTFS_TAR" ]; then
    say "using cached rootfs $ROOTFS_TAR"
  else
    command -v debootstrap >/dev/null 2>&1 || {
      say "installing debootstrap"
      "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends --no-remove debootstrap >/tmp/aoti-guard-apt.log 2>&1 \
        || { "${SUDO[@]}" apt-get update -q >>/tmp/aoti-guard-apt.log 2>&1
             "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends --no-remove debootstrap >>/tmp/aoti-guard-apt.log 2>&1; } \
        || { tail -n 20 /tmp/aoti-guard-apt.log >&2; die "apt-get install debootstrap failed"; }
    }
    MIRROR=${AOTI_GUARD_DEBIAN_MIRROR:-$(find_mirror || true)}
    [ -n "$MIRROR" ] || die "no Debian mirror for '$SUITE' in /etc/apt/sources.list*; set AOTI_GUARD_DEBIAN_MIRROR"
    mkdir -p "$CACHE/rootfs"
    WORK=$(mktemp -d "$CACHE/rootfs/work.XXXXXX")
    trap '"${SUDO[@]}" rm -rf "$WORK"' EXIT
    T1=$(date +%s.%N)
    say "debootstrap --variant=minbase --include=$INCLUDE $SUITE <rootfs> $MIRROR"
    if ! "${SUDO[@]}" debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$WORK/root" "$MIRROR" >"$WORK/debootstrap.log" 2>&1; then
      tail -n 30 "$WORK/debootstrap.log" >&2
      [ -f "$WORK/root/debootstrap/debootstrap.log" ] && tail -n 30 "$WORK/root/debootstrap/debootstrap.log" >&2
      die "debootstrap failed"
    fi
    say "debootstrap done in $(el "$T1")s"
    R=$WORK/root
    for p in "${STRIP[@]}"; do "${SUDO[@]}" find "$R/$p" -mindepth 1 -delete 2>/dev/null || true; done
    "${SUDO[@]}" rm -f "$R"/var/cache/debconf/*-old "$R"/var/lib/dpkg/*-old
    # keep later `apt-get install` in derived images from bringing docs back
    printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-exclude /usr/share/man/*' \
      'path-exclude /usr/share/info/*' 'path-exclude /usr/share/locale/*' \
      'path-exclude /usr/share/i18n/*' | "${SUDO[@]}" tee "$R/etc/dpkg/dpkg.cfg.d/01-aoti-guard-nodoc" >/dev/null
    # resolv.conf/hostname/hosts come from the engine at run time
    "${SUDO[@]}" rm -f "$R/etc/resolv.conf" "$R/etc/hostname"
    say "rootfs stripped to $(du -sh "$R" | cut -f1); writing $ROOTFS_TAR"
    "${SUDO[@]}" tar --numeric-owner --xattrs --acls -C "$R" -cf "$ROOTFS_TAR.tmp" .
    mv "$ROOTFS_TAR.tmp" "$ROOTFS_TAR"
    "${SUDO[@]}" rm -rf "$WORK"; trap - EXIT
  fi
  T1=$(date +%s.%N)
  docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'ENV LANG=C.UTF-8' \
    -c 'CMD ["python3"]' \
    -c "LABEL aoti-guard.recipe=$BASE_RECIPE aoti-guard.torch=none" \
    -m "aoti-guard base: debootstrap $SUITE minbase + $INCLUDE" \
    "$ROOTFS_TAR" "$BASE_TAG" >/dev/null
  say "imported $BASE_TAG in $(el "$T1")s"
fi
BASE_ID=$(docker image inspect --format '{{.Id}}' "$BASE_TAG")

# ---------------------------------------------------------------- derived images
build_derived() {  # tag dockerfile recipe [wheels-dir]
  local tag=$1 dockerfile=$2 recipe=$3 wheels=${4:-} ctx T1
  ctx=$(mktemp -d "${TMPDIR:-/tmp}/aoti-guard-ctx.XXXXXX")
  cp "$CTR_DIR/$dockerfile" "$ctx/Dockerfile"
  if [ -n "$wheels" ]; then
    cp "$CTR_DIR/torch-requirements.txt" "$ctx/"
    mkdir "$ctx/wheels"
    cp -l "$wheels"/*.whl "$ctx/wheels/" 2>/dev/null || cp "$wheels"/*.whl "$ctx/wheels/"
  fi
  T1=$(date +%s.%N)
  if ! docker build --network none --force-rm --build-arg "BASE=$BASE_TAG" \
        --label "aoti-guard.recipe=$recipe" -t "$tag" "$ctx" >"$ctx.log" 2>&1; then
    tail -n 40 "$ctx.log" >&2; rm -rf "$ctx"; die "docker build $tag failed (log: $ctx.log)"
  fi
  rm -rf "$ctx" "$ctx.log"
  # the multi-stage build leaves its build stage as an untagged image: drop it
  docker image prune -f --filter label=aoti-guard.stage=build >/dev/null 2>&1 || true
  say "built $tag in $(el "$T1")s ($(docker image inspect --format '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}'))"
}

NOTORCH_RECIPE=$(cat "$CTR_DIR/notorch.Dockerfile" <(echo "$BASE_ID") | sha)
if [ "${AOTI_GUARD_REBUILD:-0}" != 1 ] && img_exists_with_recipe "$NOTORCH_TAG" "$NOTORCH_RECIPE"; then
  say "$NOTORCH_TAG exists: skipped"
else
  build_derived "$NOTORCH_TAG" notorch.Dockerfile "$NOTORCH_RECIPE"
fi

if [ "${AOTI_GUARD_SKIP_TORCH:-0}" = 1 ]; then
  say "AOTI_GUARD_SKIP_TORCH=1: $TORCH_TAG not built"
else
  TORCH_RECIPE=$(cat "$CTR_DIR/torch.Dockerfile" "$CTR_DIR/torch-requirements.txt" <(echo "$BASE_ID") | sha)
  if [ "${AOTI_GUARD_REBUILD:-0}" != 1 ] && img_exists_with_recipe "$TORCH_TAG" "$TORCH_RECIPE"; then
    say "$TORCH_TAG exists: skipped"
  else
    WHEELS=$CACHE/wheels/torch-2.13.0-cpu-py311-$(sha <"$CTR_DIR/torch-requirements.txt")
    mkdir -p "$WHEELS"
    T1=$(date +%s.%N)
    # wheels for the image's CPython 3.11 on manylinux x86_64, whatever the host python is;
    # files already in $WHEELS are not fetched again
    # the project's venv has pip (a system python3 may not); scripts/setup.sh makes it
    PY=$REPO/.venv/bin/python; [ -x "$PY" ] || PY=python3
    "$PY" -m pip --version >/dev/null 2>&1 || die "python with pip needed on the host to fetch wheels: run scripts/setup.sh first"
    if ! "$PY" -m pip download -q --disable-pip-version-check -d "$WHEELS" -r "$CTR_DIR/torch-requirements.txt" \
          --only-binary=:all: --python-version 3.11 --implementation cp --abi cp311 \
          --platform manylinux_2_28_x86_64 >"$WHEELS.log" 2>&1; then
      tail -n 20 "$WHEELS.log" >&2; die "pip download of the torch wheels failed (log: $WHEELS.log)"
    fi
    rm -f "$WHEELS.log"
    say "wheels ready in $WHEELS ($(du -sh "$WHEELS" | cut -f1), $(el "$T1")s)"
    build_derived "$TORCH_TAG" torch.Dockerfile "$TORCH_RECIPE" "$WHEELS"
  fi
fi

# images of ours that a rebuild untagged (old recipes) are dangling now: drop them
docker image prune -f --filter label=aoti-guard.recipe >/dev/null 2>&1 || true
docker image ls --format '{{.Repository}}:{{.Tag}}  {{.Size}}  {{.ID}}' | grep '^aoti-guard/' | sed 's/^/  /' || true
say "done in $(el "$T0")s"
