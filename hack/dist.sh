#!/usr/bin/env bash
# `make dist`: release artefacts in dist/ (docs/release.md). goreleaser (pinned in
# hack/tools/go.mod, built by `go tool` on first use) builds every command per platform, the
# kubectl plugin's archives, their sha256 checksums and the krew manifest (.goreleaser.yaml);
# then imagepack packs the linux binaries of extender, gpushare-scheduler and share-plugin
# (gpushare-limit-hook and the static gpushare-probe beside it) into image tarballs tagged
# with the same version (there is no docker engine to build them), and helm packages the
# chart at that version.
#
# Version: `git describe --tags --always --dirty` (a snapshot). RELEASE=1 builds the release
# of the VERSION file and refuses unless HEAD is the clean commit tagged with it.
set -o errexit -o nounset -o pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/lib/bins.sh
source "$REPO/hack/lib/bins.sh"
cd "$REPO"
log() { printf '[dist %s] %s\n' "$(date +%T)" "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

export GOWORK=off
release_version=$(cat VERSION)
describe=$(git describe --tags --always --dirty)
semver='^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$'
if [ "${RELEASE:-0}" = 1 ]; then
  [ "$describe" = "$release_version" ] ||
    die "RELEASE=1 builds $release_version (VERSION) from the clean commit tagged with it; git describe says $describe"
  version=$release_version
  mode=()
else
  version=$describe
  # Krew and image references want a semver; a clone without tags describes itself as a bare
  # commit, which becomes a pre-release of VERSION.
  [[ $version =~ $semver ]] || version=$release_version-dev.g$describe
  mode=(--snapshot)
fi
[[ $version =~ $semver ]] || die "version $version is not vMAJOR.MINOR.PATCH[-PRERELEASE]"
sched_k8s=$(sed -n 's/^[[:space:]]*k8s.io\/kubernetes \(v[0-9.]*\)$/\1/p' cmd/gpushare-scheduler/go.mod)
[ -n "$sched_k8s" ] || die "no k8s.io/kubernetes version in cmd/gpushare-scheduler/go.mod"

goreleaser=(go tool -modfile=hack/tools/go.mod goreleaser)
log "goreleaser $version (kube-scheduler $sched_k8s; the first run builds goreleaser, minutes)"
"${goreleaser[@]}" check
DIST_VERSION=$version SCHED_K8S=$sched_k8s "${goreleaser[@]}" release --clean "${mode[@]}"

# goreleaser leaves the components' binaries in its build folders (dist/<cmd>_<os>_<arch>_<level>/);
# link each under its release name, the one the checksums file lists, and check the sums.
checksums=dist/gpushare_${version}_checksums.txt
while read -r _ name; do
  case $name in *.tar.gz | *.zip) continue ;; esac
  IFS=_ read -r c _ os arch <<<"$name"
  src=(dist/"${c}_${os}_${arch}"_*/"$c")
  { [ ${#src[@]} = 1 ] && [ -f "${src[0]}" ]; } || die "$name: no single build in dist/${c}_${os}_${arch}_*/"
  ln -f "${src[0]}" "dist/$name"
done <"$checksums"
(cd dist && sha256sum --quiet -c "$(basename "$checksums")") || die "dist/ does not match $checksums"

# Images: the same tags on both architectures, one tarball each; docs/release.md shows how
# to push them as one multi-arch reference.
images=dist/images
mkdir -p "$images"
imagepack=$(mktemp -d)/imagepack
trap 'rm -rf "$(dirname "$imagepack")"' EXIT
go build -o "$imagepack" ./hack/imagepack
for c in extender gpushare-scheduler share-plugin; do
  user=()
  # share-plugin stays root: it creates its socket in kubelet's root-owned folder.
  [ "$c" != share-plugin ] && user=(-user 65534:65534)
  for arch in amd64 arm64; do
    bin=dist/${c}_${version}_linux_${arch}
    [ -f "$bin" ] || die "$bin: goreleaser did not build it"
    files=("$bin=/usr/bin/$c")
    # share-plugin's DaemonSet installs the limit hook on the host from its own image.
    if [ "$c" = share-plugin ]; then
      hook=dist/gpushare-limit-hook_${version}_linux_${arch}
      [ -f "$hook" ] || die "$hook: goreleaser did not build it"
      files+=("$hook=/usr/bin/gpushare-limit-hook")
      # deploy/mps's init container copies gpushare-mps out of it.
      mps=dist/gpushare-mps_${version}_linux_${arch}
      [ -f "$mps" ] || die "$mps: goreleaser did not build it"
      files+=("$mps=/usr/bin/gpushare-mps")
      # The isolation probe `kubectl inspect gpushare --verify` runs from this image: the
      # static build (the image has no C library to load libcuda with).
      probe=dist/gpushare-probe-static_${version}_linux_${arch}
      [ -f "$probe" ] || die "$probe: goreleaser did not build it"
      files+=("$probe=/usr/bin/gpushare-probe")
    fi
    "$imagepack" -o "$images/${c}_${version}_linux_${arch}.tar" -tag "gpushare/$c:$version" \
      -arch "$arch" "${user[@]}" "${files[@]}"
  done
done
(cd "$images" && sha256sum -- *.tar >"../gpushare_${version}_images_checksums.txt")

# The Helm chart, versioned like the release: its appVersion is the images' tag.
helm=$(tool_path helm)
"$helm" package deploy/helm/gpushare --version "${version#v}" --app-version "$version" -d dist >/dev/null ||
  die "helm package deploy/helm/gpushare failed"
(cd dist && sha256sum -- "gpushare-${version#v}.tgz" >"gpushare_${version}_chart_checksums.txt")
(
  cd dist
  log "dist/: $(printf '%s ' *.tar.gz *.tgz *.zip *_checksums.txt krew/*.yaml)"
)
log "images: $(cd "$images" && printf '%s ' *)"
