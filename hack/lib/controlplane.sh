# Control plane of the local cluster: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, the gpushare extender, gpushare-scheduler and kwok. Sourced after hack/lib/cluster.sh and
# hack/lib/certs.sh.
# shellcheck shell=bash

start_etcd() {
  mkdir -p "$STATE/etcd"
  start_proc etcd "$(tool_path etcd)" \
    --name gpushare \
    --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "gpushare=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync
  wait_for etcd 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health" || die "etcd not healthy; see $LOGS/etcd.log"
}

start_apiserver() {
  local pki=$STATE/pki
  start_proc kube-apiserver "$(tool_path kube-apiserver)" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 \
    --advertise-address 127.0.0.1 \
    --secure-port "$APISERVER_PORT" \
    --cert-dir "$pki/apiserver" \
    --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "$pki/sa.pub" \
    --service-account-signing-key-file "$pki/sa.key" \
    --token-auth-file "$pki/tokens.csv" \
    --authorization-mode RBAC \
    --service-cluster-ip-range 10.0.0.0/24 \
    --endpoint-reconciler-type none \
    --kubelet-preferred-address-types Hostname,InternalIP \
    --allow-privileged=true \
    --profiling=false
  wait_for "kube-apiserver /readyz" 90 apiserver_ready || die "kube-apiserver not ready; see $LOGS/kube-apiserver.log"
}

# apply_admission_policies installs deploy/admission (ValidatingAdmissionPolicies: who may
# write pod allocation annotations, share-plugin held to its node). The local extender,
# share-plugin and tests run as admin (system:masters), which the policies trust.
apply_admission_policies() {
  kubectl_ apply --server-side --field-manager gpushare-cluster-up -k "$REPO/deploy/admission" >/dev/null ||
    die "could not apply deploy/admission"
}

start_controller_manager() {
  local root_ca=()
  [ -f "$STATE/pki/apiserver/apiserver.crt" ] && root_ca=(--root-ca-file "$STATE/pki/apiserver/apiserver.crt")
  start_proc kube-controller-manager "$(tool_path kube-controller-manager)" \
    --kubeconfig "$KUBECONFIG_FILE" \
    --authentication-kubeconfig "$KUBECONFIG_FILE" \
    --authorization-kubeconfig "$KUBECONFIG_FILE" \
    --bind-address 127.0.0.1 \
    --secure-port "$KCM_PORT" \
    --leader-elect=false \
    --use-service-account-credentials=false \
    --service-account-private-key-file "$STATE/pki/sa.key" \
    "${root_ca[@]}"
}

# start_scheduler [TEMPLATE [SED_EXPR...]]: kube-scheduler with the configuration TEMPLATE
# (default: deploy/scheduler/scheduler-config.yaml; GPUSHARE_SCHEDULER_CONFIG replaces it and
# the arguments) rendered into $STATE: the kubeconfig
# path, the extender's URL (127.0.0.1 and its port; the one scheduler without leader
# election) and the folder of the extender's certificates (tlsConfig:
# $EXTENDER_PKI) filled in, then each SED_EXPR applied (the benchmarks adjust
# their configurations so). Returns once /readyz answers, i.e. informers are synced, so a
# benchmark's timing starts with a working scheduler.
start_scheduler() {
  local template=${1:-$REPO/deploy/scheduler/scheduler-config.yaml} config sed_args expr
  config=$STATE/$(basename "$template")
  if [ -n "${GPUSHARE_SCHEDULER_CONFIG:-}" ]; then
    # A configuration made elsewhere (the Helm chart's, in its e2e) instead of deploy/'s; the
    # same substitutions apply (kubeconfig path, leader election off).
    [ -f "$GPUSHARE_SCHEDULER_CONFIG" ] || die "GPUSHARE_SCHEDULER_CONFIG=$GPUSHARE_SCHEDULER_CONFIG: no such file"
    template=$GPUSHARE_SCHEDULER_CONFIG
    set -- "$template"
  fi
  sed_args=(-e "s#kubeconfig: .*#kubeconfig: $KUBECONFIG_FILE#"
    -e "s#https://gpushare-extender.kube-system.svc:12345/#https://127.0.0.1:$EXTENDER_PORT/#"
    -e "s#https://127.0.0.1:12345/#https://127.0.0.1:$EXTENDER_PORT/#"
    -e "s#leaderElect: true#leaderElect: false#"
    -e "s#/etc/kubernetes/gpushare/#$EXTENDER_PKI/#")
  for expr in "${@:2}"; do sed_args+=(-e "$expr"); done
  sed "${sed_args[@]}" "$template" >"$config" || die "could not render $template"
  start_proc kube-scheduler "$(tool_path kube-scheduler)" \
    --config "$config" \
    --authentication-kubeconfig "$KUBECONFIG_FILE" \
    --authorization-kubeconfig "$KUBECONFIG_FILE" \
    --bind-address 127.0.0.1 \
    --secure-port "$SCHEDULER_PORT"
  wait_for "kube-scheduler /readyz" 120 curl -ksf "https://127.0.0.1:$SCHEDULER_PORT/readyz" ||
    die "kube-scheduler not ready; see $LOGS/kube-scheduler.log"
}

# start_scheduler_for_mode MODE: kube-scheduler as the scheduler mode wants it: with the
# extender (extender, both) or, for plugin, deploy/scheduler/scheduler-config.yaml without its
# extenders: section (its last): the default scheduler then schedules only the pods that do
# not name gpushare-scheduler, and never calls an extender that is not running.
start_scheduler_for_mode() {
  case $1 in
  extender | both) start_scheduler ;;
  plugin)
    # shellcheck disable=SC2016 # a sed expression: $ is the last line
    local template=$REPO/deploy/scheduler/scheduler-config.yaml cut='/^extenders:/,$d'
    if sed "$cut" "$template" | grep -v '^[[:space:]]*#' | grep -q 'extenders\|urlPrefix'; then
      die "could not drop the extenders: section from $template"
    fi
    start_scheduler "$template" "$cut"
    ;;
  *) die "scheduler mode $1: want extender, plugin or both" ;;
  esac
}

# gpushare_scheduler_ready: /readyz answers (its informers are synced).
gpushare_scheduler_ready() {
  curl -ksf "https://127.0.0.1:$PLUGIN_SCHEDULER_PORT/readyz" >/dev/null
}

# start_gpushare_scheduler [TEMPLATE [SED_EXPR...]]: gpushare-scheduler (kube-scheduler with
# the GPUShare plugin; the same flags) with the configuration TEMPLATE (default:
# deploy/gpushare-scheduler/scheduler-config.yaml) rendered into
# $STATE/gpushare-scheduler-config.yaml: the kubeconfig path, leader election off (one
# replica) and the plugin's policy ($PLUGIN_POLICY) filled in, then each SED_EXPR applied
# (the benchmarks adjust their configurations so). Returns once /readyz answers on
# $PLUGIN_SCHEDULER_PORT. Without the binary it warns and returns, like start_extender.
start_gpushare_scheduler() {
  local template=${1:-$REPO/deploy/gpushare-scheduler/scheduler-config.yaml} config sed_args expr
  if [ ! -x "$GPUSHARE_BIN/gpushare-scheduler" ]; then
    log "WARNING: $GPUSHARE_BIN/gpushare-scheduler not built (make build); pods with schedulerName gpushare-scheduler will stay Pending"
    return 0
  fi
  # The name goes into a sed expression and the plugin's args: a plain word or nothing.
  [[ $PLUGIN_POLICY =~ ^[a-z][a-z0-9-]*$ ]] || die "plugin policy '$PLUGIN_POLICY': not a policy name"
  config=$STATE/gpushare-scheduler-config.yaml
  sed_args=(-e "s#kubeconfig: .*#kubeconfig: $KUBECONFIG_FILE#"
    -e "s#leaderElect: true#leaderElect: false#"
    -e "s#^\([[:space:]]*\)policy: .*#\1policy: $PLUGIN_POLICY#")
  for expr in "${@:2}"; do sed_args+=(-e "$expr"); done
  sed "${sed_args[@]}" "$template" >"$config" || die "could not render $template"
  # Fail closed: a template whose layout the expressions missed would run with another
  # policy, or campaign for a Lease nobody else holds and wait.
  {
    grep -q "^[[:space:]]*kubeconfig: $KUBECONFIG_FILE\$" "$config" &&
      grep -q '^[[:space:]]*leaderElect: false$' "$config" &&
      grep -q "^[[:space:]]*policy: $PLUGIN_POLICY\$" "$config"
  } ||
    die "could not render $template into $config (kubeconfig, leaderElect: false, policy: $PLUGIN_POLICY)"
  local skew=()
  mapfile -t skew < <(gpushare_scheduler_skew_flags)
  start_proc gpushare-scheduler "$GPUSHARE_BIN/gpushare-scheduler" \
    "${skew[@]}" \
    --config "$config" \
    --authentication-kubeconfig "$KUBECONFIG_FILE" \
    --authorization-kubeconfig "$KUBECONFIG_FILE" \
    --bind-address 127.0.0.1 \
    --secure-port "$PLUGIN_SCHEDULER_PORT"
  wait_for "gpushare-scheduler /readyz" 120 gpushare_scheduler_ready ||
    die "gpushare-scheduler not ready; see $LOGS/gpushare-scheduler.log"
}

# gpushare_scheduler_skew_flags prints, one a line, the flags gpushare-scheduler (built on
# kube-scheduler v1.37) needs against an older control plane ($K8S_BIN's kube-apiserver).
# Kubernetes 1.36 serves DeviceTaintRule only as resource.k8s.io/v1beta2 (off by default),
# while the 1.37 scheduler watches resource.k8s.io/v1 DeviceTaintRules (DRADeviceTaintRules,
# GA and on in 1.37): its informers would never sync and it would never become ready.
gpushare_scheduler_skew_flags() {
  local version minor
  [ -n "${K8S_BIN:-}" ] && [ -x "$K8S_BIN/kube-apiserver" ] || return 0
  version=$("$K8S_BIN/kube-apiserver" --version) || return 0 # "Kubernetes v1.36.3"
  minor=$(sed -n 's/^Kubernetes v1\.\([0-9]*\)\..*/\1/p' <<<"$version")
  if [ -n "$minor" ] && [ "$minor" -lt 37 ]; then
    echo "--feature-gates=DRADeviceTaintRules=false"
  fi
}

# extender_ready: /readyz on the diagnostics port answers ok over mutual TLS, the extender's
# certificate checked against its CA (so a stale extender with other certificates fails).
extender_ready() {
  curl -sf --cacert "$EXTENDER_PKI/ca.crt" --cert "$EXTENDER_PKI/client.crt" --key "$EXTENDER_PKI/client.key" \
    "https://127.0.0.1:$EXTENDER_DIAGNOSTICS_PORT/readyz" >/dev/null
}

start_extender() {
  if [ ! -x "$GPUSHARE_BIN/extender" ]; then
    log "WARNING: $GPUSHARE_BIN/extender not built (make build); GPU pods will not schedule"
    return 0
  fi
  start_proc extender "$GPUSHARE_BIN/extender" \
    --kubeconfig "${EXTENDER_KUBECONFIG:-$KUBECONFIG_FILE}" \
    --bind-address 127.0.0.1 \
    --port "$EXTENDER_PORT" \
    --diagnostics-port "$EXTENDER_DIAGNOSTICS_PORT" \
    --tls-cert-file "$EXTENDER_PKI/extender.crt" \
    --tls-private-key-file "$EXTENDER_PKI/extender.key" \
    --client-ca-file "$EXTENDER_PKI/ca.crt" \
    --client-allowed-names "$EXTENDER_VERBS_CLIENTS" \
    --policy "$EXTENDER_POLICY" \
    --node-selector cgpu=true
  wait_for "extender /readyz" 60 extender_ready || die "extender not ready; see $LOGS/extender.log"
}

start_kwok() {
  start_proc kwok "$(tool_path kwok)" \
    --kubeconfig "$KUBECONFIG_FILE" \
    --config "$(tool_path kwok-stages.yaml)" \
    --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --server-address "127.0.0.1:$KWOK_PORT"
  if [ "$KWOK_NODES" = yes ]; then
    # Create only: kwok owns the status after the first write.
    kubectl_ create -f "$REPO/hack/kwok-nodes.yaml" 2>&1 | grep -v AlreadyExists >&2 || true
  fi
}
