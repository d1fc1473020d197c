#!/usr/bin/env bash
# hack/load-images.sh [TARBALL...]: imports image tarballs (default: the component images
# `make image` packs into _output/images: extender, gpushare-scheduler, share-plugin) into the
# local cluster's containerd, where pods with imagePullPolicy Never or IfNotPresent find them.
# The cluster ($GPUSHARE_STATE_DIR) must run a real node.
set -o errexit -o nounset -o pipefail

LOG_TAG=load-images
# shellcheck source=hack/lib/cluster.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"
# shellcheck source=hack/lib/realnode.sh
source "$REPO/hack/lib/realnode.sh"

K8S_BIN=$(k8s_bin_dir)
[ -S "$CONTAINERD_SOCK" ] || die "no containerd socket at $CONTAINERD_SOCK: start the cluster with a real node (hack/cluster-up.sh)"
if [ $# -eq 0 ]; then
  set -- "$IMAGES_DIR/extender.tar" "$IMAGES_DIR/gpushare-scheduler.tar" "$IMAGES_DIR/share-plugin.tar"
fi
for t in "$@"; do
  [ -f "$t" ] || die "$t missing (make image)"
  ctr_ images import "$t" >/dev/null || die "importing $t into containerd failed"
  log "imported $t"
done
