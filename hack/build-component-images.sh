#!/usr/bin/env bash
# `make image`: packs bin/extender and bin/share-plugin (static, CGO_ENABLED=0) into one-layer
# image tarballs in _output/images, for `ctr images import` / `docker load` and a push with
# any registry tool. Tags: gpushare/<name>:$VERSION (default: git describe).
set -o errexit -o nounset -o pipefail

LOG_TAG=image
# shellcheck source=hack/lib/cluster.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"

version=${VERSION:-$(git -C "$REPO" describe --tags --always --dirty 2>/dev/null || echo dev)}
mkdir -p "$IMAGES_DIR/bin"
go build -o "$IMAGES_DIR/bin/imagepack" "$REPO/hack/imagepack"
for c in extender share-plugin; do
  [ -x "$GPUSHARE_BIN/$c" ] || die "$GPUSHARE_BIN/$c not built (make build)"
  "$IMAGES_DIR/bin/imagepack" -o "$IMAGES_DIR/$c.tar" -tag "gpushare/$c:$version" "$GPUSHARE_BIN/$c=/usr/bin/$c"
  log "$IMAGES_DIR/$c.tar: gpushare/$c:$version"
done
