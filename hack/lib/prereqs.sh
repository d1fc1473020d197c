# What the scripts take from the host, and from which Debian package. Everything else they run
# is built by the project (hack/lib/bins.sh). hack/doctor.sh checks these; the e2e suite runs
# the scripts with a PATH of these alone (hack/doctor.sh --link), so a script reaching for
# anything else fails there. Sourced, not run.
# shellcheck shell=bash
# shellcheck disable=SC2034 # read by hack/doctor.sh and hack/lib/realnode.sh

# HOST_TOOLS: "COMMAND PACKAGE NEED" per line. COMMAND is a name looked up on PATH or an
# absolute path. NEED says who needs it:
#   base      the base system's commands (Debian's essential packages and a few more):
#             the scripts, kubelet and containerd call them
#   build     make build, make test, make demo
#   lint      make lint
#   node      the local cluster's real node (as root; without these it runs kwok nodes only)
# PACKAGE go.dev/dl: Go is installed from https://go.dev/dl (the version go.mod names), not apt.
#   optional  used when present: gcc builds share-plugin with NVML (cgo), apt-get installs
#             what is missing
HOST_TOOLS=(
  "bash bash base" "sh dash base" "env coreutils base" "cat coreutils base" "cp coreutils base"
  "mv coreutils base" "rm coreutils base" "ln coreutils base" "ls coreutils base"
  "mkdir coreutils base" "rmdir coreutils base" "touch coreutils base" "chmod coreutils base"
  "readlink coreutils base" "realpath coreutils base" "dirname coreutils base"
  "basename coreutils base" "pwd coreutils base" "date coreutils base" "sleep coreutils base"
  "seq coreutils base" "sort coreutils base" "head coreutils base" "tail coreutils base"
  "tee coreutils base" "tr coreutils base" "wc coreutils base" "cut coreutils base"
  "od coreutils base" "id coreutils base" "uname coreutils base" "stat coreutils base"
  "du coreutils base" "df coreutils base" "nice coreutils base" "timeout coreutils base"
  "mktemp coreutils base" "sha256sum coreutils base" "true coreutils base" "false coreutils base"
  "grep grep base" "sed sed base" "awk mawk base" "find findutils base" "xargs findutils base"
  "cmp diffutils base" "tar tar base" "gzip gzip base" "hostname hostname base"
  "getent libc-bin base" "kill procps base" "pgrep procps base" "ps procps base"
  "uptime procps base" "setsid util-linux base" "unshare util-linux base"
  "nsenter util-linux base" "flock util-linux base" "mountpoint util-linux base"
  "mount mount base" "umount mount base" "findmnt util-linux base" "losetup mount base"
  "go go.dev/dl build" "git git build" "make make build" "curl curl build"
  "openssl openssl build"
  "shellcheck shellcheck lint"
  "runc runc node" "ip iproute2 node" "iptables iptables node"
  "/usr/lib/cni/bridge containernetworking-plugins node"
  "/usr/lib/cni/host-local containernetworking-plugins node"
  "/usr/lib/cni/loopback containernetworking-plugins node"
  "gcc gcc optional" "as binutils optional" "ld binutils optional" "apt-get apt optional"
)

# host_tool_missing COMMAND says (exit status) whether COMMAND is absent from this machine.
host_tool_missing() {
  if [[ $1 == /* ]]; then
    [ ! -x "$1" ]
  else
    ! command -v "$1" >/dev/null 2>&1
  fi
}

# missing_packages NEED...: the Debian packages (one per line) of the missing tools that one
# of the NEEDs needs.
missing_packages() {
  local line cmd pkg need
  for line in "${HOST_TOOLS[@]}"; do
    read -r cmd pkg need <<<"$line"
    if [[ " $* " == *" $need "* ]] && [ "$pkg" != go.dev/dl ] && host_tool_missing "$cmd"; then
      echo "$pkg"
    fi
  done | sort -u
}

# install_missing NEED...: installs, with apt-get, the packages missing_packages names. Only
# as root on an apt system; GPUSHARE_NO_APT=1 turns it off. A failed install is a warning: the
# caller checks what it needs.
install_missing() {
  [ "$(id -u)" = 0 ] && [ "${GPUSHARE_NO_APT:-0}" != 1 ] && command -v apt-get >/dev/null || return 0
  local want
  mapfile -t want < <(missing_packages "$@")
  [ ${#want[@]} -gt 0 ] || return 0
  echo "installing ${want[*]} (apt-get)" >&2
  local out
  if ! out=$({ DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${want[@]}"; } 2>&1); then
    echo "WARNING: apt-get install ${want[*]} failed:" >&2
    echo "$out" | tail -n 20 >&2
  fi
}
