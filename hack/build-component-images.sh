#!/usr/bin/env bash
# `make image`: packs bin/extender, bin/gpushare-scheduler and a static (CGO_ENABLED=0)
# share-plugin (with gpushare-limit-hook and gpushare-probe beside it) into one-layer image tarballs in
# _output/images, for `ctr images import` / `docker load` and a push with any registry tool.
# Tags: gpushare/<name>:$IMAGE_TAG (default: the VERSION file, the tag the manifests in
# deploy/ reference). The images have no base image (nothing but the binaries), and the
# extender's and gpushare-scheduler's run as the unprivileged 65534:65534 (nobody) unless the
# pod says otherwise.
# The static share-plugin serves simulated GPUs only: on real GPU nodes it needs cgo and
# glibc, so build that image with deploy/share-plugin/Dockerfile.
set -o errexit -o nounset -o pipefail

LOG_TAG=image
# shellcheck source=hack/lib/cluster.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"

version=${IMAGE_TAG:-$(cat "$REPO/VERSION")}
mkdir -p "$IMAGES_DIR/bin"
go build -o "$IMAGES_DIR/bin/imagepack" "$REPO/hack/imagepack"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$IMAGES_DIR/bin/share-plugin" "$REPO/cmd/share-plugin"
# The share-plugin image also carries gpushare-limit-hook, which its DaemonSet's init
# container installs on the host (static too: simulated GPUs only, like this share-plugin).
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$IMAGES_DIR/bin/gpushare-limit-hook" "$REPO/cmd/gpushare-limit-hook"
# And gpushare-mps, which deploy/mps's init container copies out of it.
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$IMAGES_DIR/bin/gpushare-mps" "$REPO/cmd/gpushare-mps"
# And gpushare-probe, which `kubectl inspect gpushare --verify` runs from this image: static
# (-tags nocuda), as the image has no C library to load libcuda.so.1 with.
CGO_ENABLED=0 go build -trimpath -tags nocuda -ldflags "-s -w" -o "$IMAGES_DIR/bin/gpushare-probe" "$REPO/cmd/gpushare-probe"
for c in extender gpushare-scheduler share-plugin; do
  src=$GPUSHARE_BIN/$c
  [ "$c" = share-plugin ] && src=$IMAGES_DIR/bin/$c
  [ -x "$src" ] || die "$src not built (make build)"
  user=()
  files=("$src=/usr/bin/$c")
  [ "$c" = share-plugin ] && files+=("$IMAGES_DIR/bin/gpushare-limit-hook=/usr/bin/gpushare-limit-hook" "$IMAGES_DIR/bin/gpushare-mps=/usr/bin/gpushare-mps" "$IMAGES_DIR/bin/gpushare-probe=/usr/bin/gpushare-probe")
  # share-plugin stays root: it creates its socket in kubelet's root-owned folder.
  [ "$c" != share-plugin ] && user=(-user 65534:65534)
  "$IMAGES_DIR/bin/imagepack" -o "$IMAGES_DIR/$c.tar" -tag "gpushare/$c:$version" "${user[@]}" "${files[@]}"
  log "$IMAGES_DIR/$c.tar: gpushare/$c:$version"
done
