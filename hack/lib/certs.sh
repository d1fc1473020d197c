# Generated credentials of the local cluster: an admin token, the service-account key pair and
# a kubeconfig. Sourced by hack/cluster-up.sh after hack/lib/cluster.sh.
# shellcheck shell=bash

# ensure_credentials creates (once per state dir) $STATE/pki/{token,tokens.csv,sa.key,sa.pub}
# and the kubeconfig for https://127.0.0.1:$APISERVER_PORT.
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
}

# apiserver_ready: /readyz answers ok.
apiserver_ready() {
  curl -ksf -H "Authorization: Bearer $(cat "$STATE/pki/token")" \
    "https://127.0.0.1:$APISERVER_PORT/readyz" >/dev/null
}
