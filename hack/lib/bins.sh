# Where the scripts find the programs this project builds: hack/build-k8s.sh's cache folder
# and hack/tools.sh, never PATH, so a machine's own kubectl, ctr or containerd (another
# version, or none at all) plays no part. Host tools are prerequisites (hack/lib/prereqs.sh).
# Sourced, not run; needs REPO.
# shellcheck shell=bash
# shellcheck disable=SC2034 # PROJECT_TOOLS is read by test/scripts as well

# PROJECT_TOOLS: every program the project builds for its scripts. Scripts reach them through
# tool_path only; test/scripts fails on a bare call of one of them.
PROJECT_TOOLS=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl kwok
  containerd containerd-shim-runc-v2 ctr helm)

# k8s_bin_dir prints the folder of the pinned Kubernetes binaries and the node's containerd
# (GPUSHARE_K8S_BIN, else hack/build-k8s.sh's cache, built on first use).
k8s_bin_dir() {
  if [ -n "${GPUSHARE_K8S_BIN:-}" ]; then
    echo "$GPUSHARE_K8S_BIN"
    return
  fi
  "$REPO/hack/build-k8s.sh" | tail -n1
}

# tool_path NAME prints the path of the project-built program NAME (or kwok-stages.yaml, the
# file built beside kwok): hack/build-k8s.sh's programs from $K8S_BIN when a script has set it,
# else from k8s_bin_dir; helm from hack/tools.sh. Fails, saying why, when it is not there or
# NAME is not a project tool.
tool_path() {
  local name=$1 dir
  case $name in
  helm)
    "$REPO/hack/tools.sh" helm
    return
    ;;
  kwok-stages.yaml) ;;
  *)
    if [[ " ${PROJECT_TOOLS[*]} " != *" $name "* ]]; then
      echo "tool_path: $name is not built by this project (host tools: hack/doctor.sh)" >&2
      return 2
    fi
    ;;
  esac
  dir=${K8S_BIN:-}
  [ -n "$dir" ] || dir=$(k8s_bin_dir) || return 1
  if [ ! -e "$dir/$name" ]; then
    echo "tool_path: no $name in $dir (hack/build-k8s.sh builds it)" >&2
    return 1
  fi
  echo "$dir/$name"
}
