#!/usr/bin/env bash
# A real container runtime for the container tests (pytest -m container): Debian's podman 4.3
# with runc, a Debian base image built here (no container registry is needed), the CPU-sized
# wheels of the training image's lock, and `podman system service` answering the docker CLI.
#   eval "$(bash scripts/container-runtime.sh)"    # then: .venv/bin/python -m pytest -m container
# Idempotent: a second call only checks each step and prints the same exports. Needs root and,
# the first time, the Debian mirror and the package index (apt, mmdebstrap, pip download). It
# writes only under $FINETUNE_CONTAINERS (default /var/tmp/finetune-containers), podman's own
# storage (/var/lib/containers) and, the first time, the three apt packages; nothing in /etc.
#
# What this machine needs, measured (docs/security.md, "The training image"):
# - crun 1.8 refuses hybrid cgroups, and podman's default ulimits (nofile 1048576) exceed the
#   hard limit of a root without CAP_SYS_RESOURCE: containers.conf (named by CONTAINERS_CONF)
#   sets runtime = "runc", nofile at this shell's hard limit and nproc at 32768 (runc failed
#   to set 65536 with a hard limit of 96365). `podman build` does not read these defaults:
#   the tests pass the same values with --ulimit.
# - the base image is mmdebstrap's Debian 12 (Python 3.11, pip, the libraries libmxnet.so
#   takes from the system) with this machine's CA certificates (outbound TLS may be
#   intercepted), imported as $BASE_IMAGE: the Dockerfile's BASE build argument.
# - the training image's lock with the CPU mxnet of the dev lock in place of mxnet-cu112
#   (the same versions otherwise, same hashes), downloaded once into $STATE/wheels.
# - podman 4.3's `docker run --rm` always exits 0 (fixed in 4.6): the tests run without --rm.
set -euo pipefail
cd "$(dirname "$0")/.."
STATE="${FINETUNE_CONTAINERS:-/var/tmp/finetune-containers}"
BASE_IMAGE=localhost/finetune-base:bookworm
# the Debian mirror this machine's apt already uses (the first URIs of its deb822 sources)
MIRROR="${DEBIAN_MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null)}"
[[ -n "$MIRROR" ]] || { echo "no Debian mirror in /etc/apt/sources.list.d; To fix: set DEBIAN_MIRROR" >&2; exit 1; }
SOCK="$STATE/podman.sock"
export CONTAINERS_CONF="$STATE/containers.conf"
export DOCKER_HOST="unix://$SOCK"
mkdir -p "$STATE/wheels"
changed=

step() { # NAME COMMAND...: run it, say how long it took (stderr: stdout is the exports)
  local name=$1 t0=$SECONDS
  shift
  "$@" >&2
  echo "container-runtime: ${name}: $((SECONDS - t0)) s" >&2
}

packages() {
  local missing=()
  for cmd in podman runc mmdebstrap; do command -v "$cmd" >/dev/null || missing+=("$cmd"); done
  [[ ${#missing[@]} -eq 0 ]] && return
  if [[ $(id -u) -ne 0 ]]; then
    echo "container-runtime: ${missing[*]} missing and this is not root." \
      "To fix: run as root, or apt-get install podman runc mmdebstrap" >&2
    return 1
  fi
  apt-get update -qq
  # with podman's recommends: netavark and aardvark-dns (the default bridge network), catatonit
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc mmdebstrap >/dev/null
}

config() {
  local nofile nproc
  nofile=$(ulimit -Hn)
  nproc=$(ulimit -Hu)
  [[ "$nofile" == unlimited ]] && nofile=1048576
  # (nproc: a container's runc could not set more than 32768 here, whatever the hard limit)
  [[ "$nproc" == unlimited || "$nproc" -gt 32768 ]] && nproc=32768
  cat > "$CONTAINERS_CONF.tmp" <<EOF
# written by scripts/container-runtime.sh
[containers]
default_ulimits = ["nofile=${nofile}:${nofile}", "nproc=${nproc}:${nproc}"]

[engine]
runtime = "runc"
EOF
  if ! cmp -s "$CONTAINERS_CONF.tmp" "$CONTAINERS_CONF"; then
    changed=1  # a running service read the old file: service() starts a new one
  fi
  mv "$CONTAINERS_CONF.tmp" "$CONTAINERS_CONF"
}

base_image() {
  podman image exists "$BASE_IMAGE" && return
  # the host's extra CA certificates (update-ca-certificates folds them into the bundle)
  # shellcheck disable=SC2016  # mmdebstrap expands "$1" (the new root) in its hooks
  mmdebstrap --quiet --variant=minbase \
    --include=python3,python3-pip,ca-certificates,libgomp1,libquadmath0 \
    --customize-hook='copy-in /usr/local/share/ca-certificates /usr/local/share' \
    --customize-hook='chroot "$1" update-ca-certificates' \
    --customize-hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
    bookworm - "$MIRROR" \
    | podman import \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE"
}

block() { # NAME LOCK: the entry NAME==... of a hashed lock (its continuation lines too)
  awk -v n="$1==" 'index($0, n) == 1 {p = 1} p {print} p && !/\\$/ {exit}' "$2"
}

wheels() {
  # the image lock with the dev lock's CPU mxnet in place of mxnet-cu112; the build tools
  # (uv, setuptools, wheel) are the dev lock's, as the Dockerfile takes them
  {
    awk '/^mxnet-cu112==/ {skip = 1} skip && !/\\$/ {skip = 0; next} !skip' \
      requirements/image.lock
    block mxnet requirements/dev.lock
  } > "$STATE/image-cpu.lock.tmp"
  mv "$STATE/image-cpu.lock.tmp" "$STATE/image-cpu.lock"
  local tool
  for tool in uv setuptools wheel; do block "$tool" requirements/dev.lock; done \
    > "$STATE/build-tools.lock"
  # pip downloads what is missing and checks every file against the locks' hashes (first
  # offline: a second call finds every wheel here and asks no index)
  local py=.venv/bin/python
  [[ -x "$py" ]] || py=python3
  "$py" -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes \
    --no-index --find-links "$STATE/wheels" -d "$STATE/wheels" \
    -r "$STATE/image-cpu.lock" -r "$STATE/build-tools.lock" >/dev/null 2>&1 && return
  "$py" -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes \
    --only-binary=:all: --python-version 3.11 --platform manylinux2014_x86_64 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux1_x86_64 --platform manylinux2010_x86_64 \
    -r "$STATE/image-cpu.lock" -r "$STATE/build-tools.lock" -d "$STATE/wheels" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}

service() {
  if [[ -n "$changed" && -s "$STATE/service.pid" ]]; then
    kill "$(cat "$STATE/service.pid")" 2>/dev/null || true  # the one this script started
    sleep 0.5
  fi
  if docker version >/dev/null 2>&1; then return; fi
  rm -f "$SOCK"
  setsid nohup podman system service --time=0 "unix://$SOCK" \
    >"$STATE/service.log" 2>&1 < /dev/null &
  echo $! > "$STATE/service.pid"
  for _ in $(seq 100); do
    docker version >/dev/null 2>&1 && return
    sleep 0.1
  done
  echo "container-runtime: podman system service did not answer on $SOCK." \
    "To fix: read $STATE/service.log" >&2
  return 1
}

start=$SECONDS
step "packages" packages
step "containers.conf" config
step "base image ${BASE_IMAGE}" base_image
step "wheels of the image lock (CPU mxnet)" wheels
step "podman system service" service
echo "container-runtime: ready in $((SECONDS - start)) s" >&2
cat > "$STATE/env" <<EOF
export CONTAINERS_CONF=$CONTAINERS_CONF
export DOCKER_HOST=$DOCKER_HOST
export FINETUNE_CONTAINERS=$STATE
EOF
cat "$STATE/env"
