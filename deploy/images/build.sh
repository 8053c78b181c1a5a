#!/usr/bin/env bash
# Builds the tandem image with no registry: a Debian bookworm base from Debian's own packages
# (mmdebstrap), imported with `podman import`, then deploy/images/Containerfile on top of it with
# --pull=never. Where a registry is reachable, `podman build -f deploy/images/Containerfile .`
# (default BASE: debian:bookworm-slim from Docker Hub) gives the same image.
#
#   deploy/images/build.sh                 # -> localhost/tandem:dev
#
# Environment (all optional):
#   TANDEM_IMAGE       tag of the result (default localhost/tandem:dev)
#   TANDEM_BASE_IMAGE  tag of the imported base (default localhost/tandem-base:bookworm); built
#                      only when absent, or always with TANDEM_REBUILD_BASE=1
#   DEBIAN_MIRROR      a Debian mirror URL (its bookworm, bookworm-updates and, from the
#                      sibling debian-security, bookworm-security suites); default: this host's
#                      own apt sources, so the base matches what the host installs (the host
#                      must then be bookworm)
#   JOBS               compile jobs in the build stage (default: nproc)
#   TANDEM_CCACHE_DIR  a host ccache directory to compile with (default: none; the build stage's
#                      own cache mount is used). On a machine whose host build uses the same
#                      Debian compiler and flags this skips most of the compile.
#   NICE               niceness of the build (default 10)
#   TANDEM_CONTEXT     head (default): build the committed tree (`git archive HEAD`), so the
#                      image is exactly the commit it is labelled with; worktree: the working
#                      tree as it is, uncommitted changes included
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
# shellcheck source=podman-env.sh
source "$root/deploy/images/podman-env.sh"

image="${TANDEM_IMAGE:-localhost/tandem:dev}"
base="${TANDEM_BASE_IMAGE:-localhost/tandem-base:bookworm}"
mirror="${DEBIAN_MIRROR:-}"
jobs="${JOBS:-$(nproc)}"
niceness="${NICE:-10}"

step() { echo "== $*" >&2; }

missing=()
for tool in podman mmdebstrap; do command -v "$tool" >/dev/null || missing+=("$tool"); done
# runc: the fallback runtime of podman-env.sh; uidmap: podman's user namespaces.
dpkg-query -W -f='${Status}' runc 2>/dev/null | grep -q "install ok installed" || missing+=(runc)
if ((${#missing[@]})); then
  step "installing ${missing[*]}"
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q "${missing[@]}" uidmap
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [[ "${TANDEM_REBUILD_BASE:-0}" == 1 ]] || ! podman image exists "$base"; then
  if [[ -n "$mirror" ]]; then
    sources=("deb $mirror bookworm main" "deb $mirror bookworm-updates main"
      "deb ${mirror%/debian}/debian-security bookworm-security main")
  else
    # shellcheck disable=SC1091
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    if [[ "$codename" != bookworm ]]; then
      echo "this host is not Debian bookworm ($codename): set DEBIAN_MIRROR" >&2
      exit 1
    fi
    # mmdebstrap pastes a file argument into the chroot's sources (one-line or deb822 style).
    sources=()
    [[ -s /etc/apt/sources.list ]] && sources+=(/etc/apt/sources.list)
    for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
      [[ -s "$f" ]] && sources+=("$f")
    done
    ((${#sources[@]})) || { echo "no apt sources on this host: set DEBIAN_MIRROR" >&2; exit 1; }
  fi
  step "base: mmdebstrap bookworm from ${sources[*]}"
  # --variant=apt: Essential + apt (the Containerfile installs with apt-get), like the registry's
  # debian:bookworm-slim; docs, man pages and locales dropped as slim does.
  mmdebstrap --variant=apt --include=ca-certificates \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --aptopt='APT::Install-Recommends "false"' \
    bookworm "$work/rootfs.tar" "${sources[@]}"
  step "base: podman import -> $base"
  podman import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' \
    --message "debian bookworm (mmdebstrap, --variant=apt)" "$work/rootfs.tar" "$base" >/dev/null
  rm -f "$work/rootfs.tar"
fi

step "probing how containers start here"
if ! tandem_podman_flags "$base" /bin/true; then
  echo "podman cannot start a container on this machine:" >&2
  echo "$TANDEM_PODMAN_ERROR" >&2
  exit 1
fi
[[ ${#TANDEM_PODMAN_FLAGS[@]} -eq 0 ]] || step "using podman flags: ${TANDEM_PODMAN_FLAGS[*]}"

build_flags=("${TANDEM_PODMAN_FLAGS[@]}")
if [[ -n "${TANDEM_CCACHE_DIR:-}" ]]; then
  build_flags+=(--volume "$TANDEM_CCACHE_DIR:/host-ccache" --build-arg CCACHE_DIR=/host-ccache)
fi
commit="$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
context="$root"
if [[ "${TANDEM_CONTEXT:-head}" == head && "$commit" != unknown ]]; then
  context="$work/context"
  mkdir -p "$context"
  git -C "$root" archive HEAD | tar -x -C "$context"
  if [[ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]]; then
    step "note: uncommitted changes are not in the image (TANDEM_CONTEXT=worktree takes them)"
  fi
elif [[ "${TANDEM_CONTEXT:-head}" == worktree ]]; then
  commit="$commit-dirty"
fi
# --network=host: only the build stages' apt-get needs the network (Debian's mirror), and a
# rootful bridge may not be available on a build machine.
step "podman build $image on $base (commit $commit, $jobs jobs)"
nice -n "$niceness" podman build --pull=never --network=host \
  --build-arg BASE="$base" --build-arg GIT_COMMIT="$commit" --build-arg JOBS="$jobs" \
  "${build_flags[@]}" -f "$context/deploy/images/Containerfile" -t "$image" "$context"

step "smoke test: tandem-router --version under --network=none"
podman run --rm --network=none "${TANDEM_PODMAN_FLAGS[@]}" "$image" tandem-router --version
echo "built $image"
