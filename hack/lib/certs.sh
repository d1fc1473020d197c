# Generated credentials of the local cluster: an admin token, the service-account key pair, a
# kubeconfig, and the gpushare extender's mutual-TLS certificates. Sourced by
# hack/cluster-up.sh after hack/lib/cluster.sh.
# shellcheck shell=bash

# ensure_credentials creates (once per state dir) $STATE/pki/{token,tokens.csv,sa.key,sa.pub},
# the kubeconfig for https://127.0.0.1:$APISERVER_PORT and the extender's certificates
# (ensure_extender_certs).
ensure_credentials() {
  local pki=$STATE/pki
  mkdir -p "$pki"
  chmod 700 "$pki"
  if [ ! -s "$pki/token" ]; then
    openssl rand -hex 24 >"$pki/token"
  fi
  local token
  token=$(cat "$pki/token")
  echo "$token,admin,admin,system:masters" >"$pki/tokens.csv"
  if [ ! -s "$pki/sa.key" ]; then
    openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
    openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  fi
  # The apiserver self-signs its serving certificate, so clients skip verification; this
  # cluster listens on 127.0.0.1 only.
  cat >"$KUBECONFIG_FILE" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: gpushare-local
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: $token
contexts:
- name: gpushare-local
  context:
    cluster: gpushare-local
    user: admin
    namespace: default
current-context: gpushare-local
EOF
  chmod 600 "$KUBECONFIG_FILE"
  ensure_extender_certs
}

# apiserver_ready: /readyz answers ok.
apiserver_ready() {
  curl -ksf -H "Authorization: Bearer $(cat "$STATE/pki/token")" \
    "https://127.0.0.1:$APISERVER_PORT/readyz" >/dev/null
}

# EXTENDER_VERBS_CLIENTS are the common names the local extender admits on its verbs port
# (--client-allowed-names): kube-scheduler's certificate and the tools' one, with which e2e
# and the benchmarks call the verbs directly. A production extender admits kube-scheduler's
# alone (docs/extender.md, "Transport").
# shellcheck disable=SC2034 # read by start_extender (hack/lib/controlplane.sh)
EXTENDER_VERBS_CLIENTS=kube-scheduler,gpushare-admin

# ensure_extender_certs creates (once per state dir) the mutual-TLS material of the gpushare
# extender in $EXTENDER_PKI: a CA (ca.crt, ca.key) that signs the extender's serving
# certificate (extender.crt/.key, SANs 127.0.0.1 and localhost), kube-scheduler's client
# certificate (scheduler.crt/.key) and one for tools and tests (client.crt/.key: readiness
# checks, e2e, benchmarks, kubectl inspect gpushare --check). The extender trusts ca.crt for
# clients; the scheduler and tools trust it for the extender.
ensure_extender_certs() {
  local dir=$EXTENDER_PKI
  mkdir -p "$dir"
  chmod 700 "$dir"
  if [ ! -s "$dir/ca.crt" ] || [ ! -s "$dir/ca.key" ]; then
    openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
      -keyout "$dir/ca.key" -out "$dir/ca.crt" -days 3650 -subj "/CN=gpushare-extender-ca" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null ||
      die "could not create the extender's CA in $dir"
    rm -f "$dir/extender.crt" "$dir/scheduler.crt" "$dir/client.crt" # signed by a CA now gone
  fi
  [ -s "$dir/extender.crt" ] || issue_extender_cert extender gpushare-extender serverAuth "subjectAltName=IP:127.0.0.1,DNS:localhost"
  [ -s "$dir/scheduler.crt" ] || issue_extender_cert scheduler kube-scheduler clientAuth
  [ -s "$dir/client.crt" ] || issue_extender_cert client gpushare-admin clientAuth
}

# issue_extender_cert NAME CN USAGE [EXT]: $EXTENDER_PKI/NAME.{crt,key} signed by its CA for
# the extended key usage USAGE (serverAuth or clientAuth), valid a year.
issue_extender_cert() {
  local dir=$EXTENDER_PKI name=$1 cn=$2 usage=$3 ext=${4:-}
  local extfile=$dir/$name.ext
  printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=%s\n%s\n' "$usage" "$ext" >"$extfile"
  {
    openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
      -keyout "$dir/$name.key" -out "$dir/$name.csr" -subj "/CN=$cn" 2>/dev/null &&
      openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
        -set_serial "0x$(openssl rand -hex 16)" -days 365 -extfile "$extfile" -out "$dir/$name.crt" 2>/dev/null
  } ||
    die "could not issue the extender's $name certificate in $dir"
  rm -f "$dir/$name.csr" "$extfile"
  chmod 600 "$dir/$name.key"
}
