#!/usr/bin/env bash
# hack/tools.sh TOOL: prints the path of a pinned tool the tests need, building it once into
# ${XDG_CACHE_HOME:-~/.cache}/gpushare/tools/ from its module under hack/tools/TOOL (the
# version is the one that go.mod pins). Tools: helm; and prometheus-operator-crds,
# cert-manager-crds and kueue-crds, the folders of those projects' CRDs (from their Go modules,
# pinned below, in the module cache), which the e2e installs to dry-run the chart's
# ServiceMonitors, PrometheusRule, Issuers and Certificates and the Kueue recipe in
# deploy/examples/kueue.
set -o errexit -o nounset -o pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tool=${1:?usage: hack/tools.sh helm}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/gpushare/tools

PROMETHEUS_OPERATOR_VERSION=v0.85.0
CERT_MANAGER_VERSION=v1.21.2
KUEUE_VERSION=v0.17.0

# module_dir MODULE@VERSION: the module's folder in the Go module cache (downloaded once).
module_dir() {
  (cd "${TMPDIR:-/tmp}" && GOWORK=off GOFLAGS='' go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
}

case $tool in
  helm) pkg=helm.sh/helm/v4/cmd/helm ;;
  prometheus-operator-crds)
    dir=$(module_dir "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION")
    [ -d "$dir/example/prometheus-operator-crd" ] || { echo "hack/tools.sh: no CRDs in prometheus-operator $PROMETHEUS_OPERATOR_VERSION ($dir)" >&2; exit 1; }
    echo "$dir/example/prometheus-operator-crd"
    exit 0
    ;;
  cert-manager-crds)
    dir=$(module_dir "github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION")
    [ -d "$dir/deploy/crds" ] || { echo "hack/tools.sh: no CRDs in cert-manager $CERT_MANAGER_VERSION ($dir)" >&2; exit 1; }
    echo "$dir/deploy/crds"
    exit 0
    ;;
  kueue-crds)
    dir=$(module_dir "sigs.k8s.io/kueue@$KUEUE_VERSION")
    [ -d "$dir/config/components/crd/bases" ] || { echo "hack/tools.sh: no CRDs in kueue $KUEUE_VERSION ($dir)" >&2; exit 1; }
    echo "$dir/config/components/crd/bases"
    exit 0
    ;;
  *) echo "hack/tools.sh: unknown tool $tool (known: helm, prometheus-operator-crds, cert-manager-crds, kueue-crds)" >&2; exit 2 ;;
esac
mod=$REPO/hack/tools/$tool
version=$(sed -n "s|^[[:space:]]*${pkg%%/cmd/*} \(v[^ ]*\).*|\1|p" "$mod/go.mod")
[ -n "$version" ] || { echo "hack/tools.sh: no version of ${pkg%%/cmd/*} in $mod/go.mod" >&2; exit 1; }
out=$cache/$tool-$version
if [ ! -x "$out" ]; then
  mkdir -p "$cache"
  echo "hack/tools.sh: building $tool $version into $out (once)" >&2
  (cd "$mod" && GOWORK=off CGO_ENABLED=0 go build -trimpath -o "$out.tmp" "$pkg") >&2
  mv "$out.tmp" "$out"
fi
echo "$out"
