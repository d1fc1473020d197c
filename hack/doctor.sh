#!/usr/bin/env bash
# `make doctor`: says which host tools the project needs are missing here and how to install
# them (Debian packages; hack/lib/prereqs.sh lists them). As root on an apt system it installs
# the missing packages first (GPUSHARE_NO_APT=1: only report). Exits 1 when something
# `make build`, `make lint` or `make test` needs is still missing; what only the real node of
# the local cluster needs is reported, and the cluster runs kwok nodes without it.
#
#   hack/doctor.sh              # check (and install) everything
#   hack/doctor.sh --link DIR   # also fill DIR with links to the host tools found: the e2e
#                               # suite runs the scripts with PATH=DIR
set -o errexit -o nounset -o pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/lib/prereqs.sh
source "$REPO/hack/lib/prereqs.sh"

link_dir=
# Whose missing tools fail the check: everything make test needs; with --link (the e2e
# suite) what the scripts need.
required="base build lint"
case ${1:-} in
--link)
  link_dir=${2:?usage: hack/doctor.sh [--link DIR]}
  required="base build"
  ;;
'') ;;
*)
  echo "usage: hack/doctor.sh [--link DIR]" >&2
  exit 2
  ;;
esac

install_missing base build lint node

go_want=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$REPO/go.mod")
failed=0
for line in "${HOST_TOOLS[@]}"; do
  read -r cmd pkg need <<<"$line"
  if host_tool_missing "$cmd"; then
    how="apt-get install $pkg"
    [ "$pkg" = go.dev/dl ] && how="install Go $go_want or newer from https://go.dev/dl"
    if [[ " $required " == *" $need "* ]]; then
      echo "MISSING $cmd: $how"
      failed=1
    elif [ "$need" = node ]; then
      echo "missing $cmd: the real node of the local cluster needs it ($how; without it: kwok nodes only)"
    else
      echo "missing $cmd (needed by $need: $how)"
    fi
    continue
  fi
  if [ -n "$link_dir" ] && [[ $cmd != /* ]]; then
    mkdir -p "$link_dir"
    ln -sf "$(command -v "$cmd")" "$link_dir/$cmd"
  fi
done
if command -v go >/dev/null; then
  go_have=$(go env GOVERSION 2>/dev/null | sed 's/^go//')
  if [ "$(printf '%s\n%s\n' "$go_want" "$go_have" | sort -V | head -n1)" != "$go_want" ]; then
    echo "MISSING Go $go_want or newer (found $go_have): install it from https://go.dev/dl"
    failed=1
  fi
fi
if [ "$(id -u)" != 0 ]; then
  echo "not root: the local cluster runs kwok nodes only (the real node needs root)"
fi
if [ "$failed" = 1 ]; then
  echo "hack/doctor.sh: install what is MISSING above, then run it again" >&2
  exit 1
fi
echo "hack/doctor.sh: every host tool the build and the tests need is here" >&2
