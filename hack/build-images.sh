#!/usr/bin/env bash
# Builds the local test images as `docker save` tarballs (no Docker, no registry here):
#   $GPUSHARE_IMAGES_DIR/gpuenv.tar  gpushare.local/gpuenv:v1  (test/images/gpuenv)
#   $GPUSHARE_IMAGES_DIR/pause.tar   gpushare.local/pause:v1   (test/images/pause, sandbox image)
# hack/cluster-up.sh imports them into the real node's containerd.
set -o errexit -o nounset -o pipefail

LOG_TAG=images
# shellcheck source=hack/lib/cluster.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"

mkdir -p "$IMAGES_DIR/bin"
cd "$REPO"
log "building imagepack, gpuenv, pause"
go build -o "$IMAGES_DIR/bin/imagepack" ./hack/imagepack
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$IMAGES_DIR/bin/gpuenv" ./test/images/gpuenv
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$IMAGES_DIR/bin/pause" ./test/images/pause
"$IMAGES_DIR/bin/imagepack" -o "$IMAGES_DIR/gpuenv.tar" -tag "$IMAGE_GPUENV" "$IMAGES_DIR/bin/gpuenv=/gpuenv"
"$IMAGES_DIR/bin/imagepack" -o "$IMAGES_DIR/pause.tar" -tag "$IMAGE_PAUSE" "$IMAGES_DIR/bin/pause=/pause"
log "images in $IMAGES_DIR: $IMAGE_GPUENV, $IMAGE_PAUSE"
