#!/usr/bin/env bash
# Builds the pinned control-plane binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet, kwok) and the real node's container runtime (containerd, its runc
# shim and ctr) from Go modules into a cache outside the clone, and reuses them when present.
# Prints the bin folder on its last line.
#
# k8s.io/kubernetes cannot be `go install`ed (its go.mod replaces staging modules with local
# paths), so a throw-away wrapper module pins every staging module to the matching v0.x tag.
set -o errexit -o nounset -o pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
# K8S_VERSION=1.35.4 works as well as v1.35.4.
[[ $K8S_VERSION == v* ]] || K8S_VERSION=v$K8S_VERSION
ETCD_VERSION=${ETCD_VERSION:-v3.6.5}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
# containerd 2.x: Debian's 1.6 predates CDI in the CRI (the cdi-cri device-list strategy).
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.2.9}
CACHE=${GPUSHARE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpushare}
BIN=$CACHE/bin-$K8S_VERSION
STAGING_VERSION=v0.${K8S_VERSION#v1.}
mkdir -p "$BIN"

log() { printf '[build-k8s] %s\n' "$*" >&2; }

want=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl kwok
  containerd containerd-shim-runc-v2 ctr)
missing=()
for b in "${want[@]}"; do [ -x "$BIN/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ]; then
  log "all binaries cached in $BIN"
  echo "$BIN"
  exit 0
fi
log "missing: ${missing[*]} (a cold build takes about 20 min on 2 cores)"

# The staging modules (k8s.io/api, client-go, …) are the ones k8s.io/kubernetes replaces with
# ./staging paths in its own go.mod; the list changes between minor versions.
staging_modules() {
  local mod
  mod=$(cd "$CACHE" && GOFLAGS='' go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
  [ -f "$mod" ] || { log "cannot download k8s.io/kubernetes@$K8S_VERSION"; exit 1; }
  sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#\1#p' "$mod"
}

export GOFLAGS=-mod=mod GOTOOLCHAIN=${GOTOOLCHAIN:-local}
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${K8S_VERSION#v1.}"
ldflags=${ldflags%.*}

need_k8s=false
for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
  [ -x "$BIN/$b" ] || need_k8s=true
done
if $need_k8s; then
  W=$CACHE/wrap-k8s-$K8S_VERSION
  mkdir -p "$W"
  tools=$(cat <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
)
  gomod=$(
    echo "module gpushare.local/k8swrap"
    echo
    echo "go 1.25"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    for m in $(staging_modules); do echo "replace $m => $m $STAGING_VERSION"; done
  )
  # Re-tidy when the command list or the staging list changed.
  if [ ! -f "$W/go.sum" ] || [ "$(cat "$W/tools.go" 2>/dev/null)" != "$tools" ] ||
    [ "$(cat "$W/go.mod.in" 2>/dev/null)" != "$gomod" ]; then
    log "preparing wrapper module in $W"
    printf '%s\n' "$gomod" >"$W/go.mod"
    printf '%s\n' "$gomod" >"$W/go.mod.in"
    printf '%s\n' "$tools" >"$W/tools.go"
    rm -f "$W/go.sum"
    (cd "$W" && go mod tidy -e >&2)
  fi
  for b in kube-apiserver kube-scheduler kube-controller-manager kubelet kubectl; do
    [ -x "$BIN/$b" ] && continue
    log "building $b $K8S_VERSION"
    (cd "$W" && go build -trimpath -ldflags "$ldflags" -o "$BIN/$b.tmp" "k8s.io/kubernetes/cmd/$b" && mv "$BIN/$b.tmp" "$BIN/$b")
  done
fi

if [ ! -x "$BIN/etcd" ]; then
  E=$CACHE/wrap-etcd-$ETCD_VERSION
  mkdir -p "$E"
  if [ ! -f "$E/go.sum" ]; then
    log "preparing etcd wrapper in $E"
    printf 'module gpushare.local/etcdwrap\n\ngo 1.25\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >"$E/go.mod"
    printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$E/tools.go"
    (cd "$E" && go mod tidy -e >&2)
  fi
  log "building etcd $ETCD_VERSION"
  (cd "$E" && go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3 && mv "$BIN/etcd.tmp" "$BIN/etcd")
fi

if [ ! -x "$BIN/kwok" ]; then
  log "building kwok $KWOK_VERSION"
  GOBIN=$BIN.kwok go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >&2
  mv "$BIN.kwok/kwok" "$BIN/kwok" && rmdir "$BIN.kwok"
  # kwok's stage definitions ship in its module; keep a concatenated copy beside the binary.
  src=$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage
  for f in "$src"/node/fast/node-initialize.yaml "$src"/pod/fast/*.yaml; do
    cat "$f"; printf '\n---\n'
  done >"$BIN/kwok-stages.yaml"
fi

if [ ! -x "$BIN/containerd" ] || [ ! -x "$BIN/containerd-shim-runc-v2" ] || [ ! -x "$BIN/ctr" ]; then
  log "building containerd $CONTAINERD_VERSION"
  # The graph drivers below need C headers this machine lacks and the local node never uses.
  GOBIN=$BIN.containerd go install -trimpath -ldflags "-s -w" -tags "no_btrfs no_devmapper no_zfs" \
    "github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD_VERSION" \
    "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" \
    "github.com/containerd/containerd/v2/cmd/ctr@$CONTAINERD_VERSION" >&2
  for b in containerd containerd-shim-runc-v2 ctr; do mv "$BIN.containerd/$b" "$BIN/$b"; done
  rmdir "$BIN.containerd"
fi

log "done: $BIN"
echo "$BIN"
