# Sourced by deploy/images/build.sh and tests/deploy/image_test.sh: finds the podman flags that
# let a container start on this host.
#
# On an ordinary host none are needed. On a sandboxed build machine (no CAP_SYS_RESOURCE, cgroup
# v1/v2 hybrid) podman's defaults fail: crun refuses hybrid cgroups, and both runtimes fail to
# raise RLIMIT_NOFILE/RLIMIT_NPROC to podman's defaults. runc with limits at or below the
# caller's own works there.

# tandem_podman_flags IMAGE CMD...: sets TANDEM_PODMAN_FLAGS (an array) to the first set of flags
# with which `podman run --network=none IMAGE CMD...` succeeds; returns 1 (with the last error in
# TANDEM_PODMAN_ERROR) when none does.
tandem_podman_flags() {
  local image=$1; shift
  local nofile nproc
  nofile=$(ulimit -Hn); [[ $nofile == unlimited ]] && nofile=1048576
  nproc=4096
  local candidates=(
    ""
    "--runtime runc --ulimit nofile=$nofile:$nofile --ulimit nproc=$nproc:$nproc"
  )
  local flags
  for flags in "${candidates[@]}"; do
    # shellcheck disable=SC2086
    if TANDEM_PODMAN_ERROR=$(timeout 120 podman run --rm --network=none $flags "$image" "$@" 2>&1 >/dev/null); then
      read -r -a TANDEM_PODMAN_FLAGS <<<"$flags"
      return 0
    fi
  done
  return 1
}
