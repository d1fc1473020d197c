# The ports of a local cluster. Each cluster the repository starts has a block of its own, so
# the demo, the e2e suite and the benchmarks run side by side: GPUSHARE_PORT_BASE names the
# block (demo, e2e, replay, scale) or gives its first port. At base 0 (the demo) every
# component listens on its usual port; at base B on B plus the usual port's last three
# digits (e2e: kube-apiserver 22443, etcd 22379). GPUSHARE_<NAME>_PORT moves one port.
# Sourced, not run: the scripts through hack/lib/cluster.sh, the e2e suite through ports_env.
# shellcheck shell=bash
# shellcheck disable=SC2034 # settings used by the scripts that source this file

# port_base BLOCK prints the first port of a named block.
port_base() {
  case $1 in
  demo) echo 0 ;;
  e2e) echo 22000 ;;
  replay) echo 24000 ;;
  scale) echo 36000 ;;
  *)
    echo "port block '$1': want demo, e2e, replay, scale or a number" >&2
    return 1
    ;;
  esac
}

PORT_BASE=${GPUSHARE_PORT_BASE:-demo}
if [[ ! $PORT_BASE =~ ^[0-9]+$ ]]; then
  PORT_BASE=$(port_base "$PORT_BASE") || exit 2
fi

# cluster_port USUAL prints the port of this block for a component whose usual port is USUAL.
cluster_port() {
  if [ "$PORT_BASE" = 0 ]; then
    echo "$1"
  else
    echo $((PORT_BASE + $1 % 1000))
  fi
}

ETCD_PORT=${GPUSHARE_ETCD_PORT:-$(cluster_port 2379)}
ETCD_PEER_PORT=${GPUSHARE_ETCD_PEER_PORT:-$(cluster_port 2380)}
APISERVER_PORT=${GPUSHARE_APISERVER_PORT:-$(cluster_port 6443)}
KCM_PORT=${GPUSHARE_KCM_PORT:-$(cluster_port 10257)}
SCHEDULER_PORT=${GPUSHARE_SCHEDULER_PORT:-$(cluster_port 10259)}
EXTENDER_PORT=${GPUSHARE_EXTENDER_PORT:-$(cluster_port 12345)}
# The extender's second listener: /metrics, /healthz, /readyz, /version, inspect, pprof.
EXTENDER_DIAGNOSTICS_PORT=${GPUSHARE_EXTENDER_DIAGNOSTICS_PORT:-$((EXTENDER_PORT + 1))}
KWOK_PORT=${GPUSHARE_KWOK_PORT:-$(cluster_port 10247)}
# gpushare-scheduler's secure port (/readyz, /metrics), apart from kube-scheduler's: in
# CLUSTER_MODE=both the two run side by side.
PLUGIN_SCHEDULER_PORT=${GPUSHARE_PLUGIN_SCHEDULER_PORT:-$(cluster_port 10269)}
SHARE_PLUGIN_METRICS_PORT=${GPUSHARE_SHARE_PLUGIN_METRICS_PORT:-$(cluster_port 9401)}

# ports_env prints this block's ports as the GPUSHARE_*_PORT=N lines that set them.
ports_env() {
  printf 'GPUSHARE_%s=%s\n' \
    ETCD_PORT "$ETCD_PORT" ETCD_PEER_PORT "$ETCD_PEER_PORT" APISERVER_PORT "$APISERVER_PORT" \
    KCM_PORT "$KCM_PORT" SCHEDULER_PORT "$SCHEDULER_PORT" EXTENDER_PORT "$EXTENDER_PORT" \
    EXTENDER_DIAGNOSTICS_PORT "$EXTENDER_DIAGNOSTICS_PORT" KWOK_PORT "$KWOK_PORT" \
    PLUGIN_SCHEDULER_PORT "$PLUGIN_SCHEDULER_PORT" SHARE_PLUGIN_METRICS_PORT "$SHARE_PLUGIN_METRICS_PORT"
}
