#!/usr/bin/env bash
# What the project promises about real GPUs, checked on this machine in under 5 minutes,
# without Kubernetes: run it as root on any Linux machine with an NVIDIA GPU and driver
# (docs/isolation.md, "Verify on a real GPU", says what each line means and how to report it).
#
#   hack/gpu-acceptance.sh 2>details.log
#
# stdout: the driver's version ("driver: <version> (<source>)" or "driver: none"), then one
# line per check, "PASS|FAIL|SKIP <check>: <why>", always in this order:
#   gpu             an NVIDIA GPU and its driver are here (nvidia-smi, else NVML)
#   nvml-tests      the real-NVML Go tests of pkg/nvml and pkg/deviceplugin
#   limit-hook      gpushare-limit-hook on a kubepods-like cgroup: the driver's limit set and
#                   read back (R615+), or the container refused (older drivers)
#   usage-watchdog  a CUDA process in a kubepods-like cgroup: NVML lists it and the usage
#                   watchdog's cgroup parser maps it to its pod and container
#   mps             an MPS daemon of its own with a server-side cap, as gpushare-mps sets it; a
#                   client through a read-only pipe folder asking more is held to the cap
#   preflight       share-plugin's reading of the NVIDIA runtime's config.toml (informative)
# stderr: what each check ran and saw, indented.
# Exit status: 1 when a check FAILed, else 0 (a machine without a GPU: every check SKIPs).
#
# Environment:
#   GPUSHARE_NVML_LIBRARY           path of the libnvidia-ml.so.1 to use (default: where the
#                                   dynamic loader finds it); its folder goes first on
#                                   LD_LIBRARY_PATH for everything run here. A path that does
#                                   not exist makes this a machine without a driver (the test
#                                   of test/scripts runs it so)
#   GPUSHARE_NVIDIA_RUNTIME_CONFIG  the config.toml preflight reads
#                                   (/etc/nvidia-container-runtime/config.toml)
#   GPUSHARE_ACCEPTANCE_BUDGET_S    the time bound of the whole run (280)
#
# Host tools beyond hack/lib/prereqs.sh's: the driver's nvidia-smi and nvidia-cuda-mps-control,
# and python3 with the driver's libcuda.so.1 as the CUDA client (hack/gpuaccept/cuda_alloc.py:
# no CUDA toolkit needed); a check whose tool is missing SKIPs. Go and gcc build the hook and
# hack/gpuaccept (cgo) into a temporary folder; nothing is built on a machine without a driver.
#
# Not errexit: a failing check records FAIL and the next one runs.
set -o nounset -o pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUDGET_S=${GPUSHARE_ACCEPTANCE_BUDGET_S:-280}
RUNTIME_CONFIG=${GPUSHARE_NVIDIA_RUNTIME_CONFIG:-/etc/nvidia-container-runtime/config.toml}
CGROUP_ROOT=/sys/fs/cgroup
# Every cgroup made here is under this one, shaped as kubelet's cgroupfs driver names them
# (kubepods/pod<uid>/<container id>) so that the hook and the watchdog's parser accept them.
CGROUP_BASE=$CGROUP_ROOT/gpushare-acceptance
# The limits the checks ask for, in MiB, and the most a CUDA client here allocates: the
# client stops at ALLOC_MAX_MIB, far below the 20 GiB this script promises never to exceed.
CTR_LIMIT_MIB=2048
POD_LIMIT_MIB=3072
ALLOC_STEP_MIB=128
ALLOC_MAX_MIB=4096
ALLOC=$REPO/hack/gpuaccept/cuda_alloc.py
# Building the hook and the helper can take minutes on a cold Go cache.
BUILD_S=150

failed=0
work=""          # the temporary folder, made once a driver is found
no_gpu=""        # why this machine counts as having no GPU; empty: it has one
driver=""        # the driver's version line
card_uuid=""     # the card the checks use: the first one
card_free_mib=0  # its free memory when the run started (0: unknown)
cards_text=""    # the cards, for the gpu line
tools_state=""   # "", built, or why the hook and helper could not be built
tools_done=""    # set once ensure_tools has run
bg_pids=()       # background processes started here, stopped on exit
made_cgroups=()  # cgroup folders made here, removed on exit (deepest last)
mps_env=()       # the MPS daemon's environment while it runs

# --- output -------------------------------------------------------------------------------

# say STATUS CHECK WHY prints a check's one summary line and remembers a FAIL.
say() {
  echo "$1 $2: $3"
  if [ "$1" = FAIL ]; then failed=1; fi
  return 0
}

# detail indents stdin onto stderr: what a check ran and saw, kept apart from the summary.
detail() { sed 's/^/  | /' >&2; }

# first_line prints the first non-empty line of $1, for a summary line's reason.
first_line() { printf '%s\n' "$1" | sed -n '/./{p;q}'; }

# left MAX prints MAX or the seconds left of the run's budget, whichever is less (at least 1).
left() {
  local rest=$((BUDGET_S - SECONDS))
  if [ "$rest" -lt "$1" ]; then echo $((rest > 1 ? rest : 1)); else echo "$1"; fi
}

# --- cleanup ------------------------------------------------------------------------------

# shellcheck disable=SC2317 # run by the EXIT trap, which shellcheck 0.9 does not follow
cleanup() {
  stop_mps
  local pid
  for pid in "${bg_pids[@]}"; do
    kill "$pid" 2>/dev/null
  done
  for pid in "${bg_pids[@]}"; do
    wait "$pid" 2>/dev/null
  done
  remove_cgroups
  if [ -n "$work" ]; then rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# remove_cgroups removes the cgroups made here, deepest first; any process still in one is
# one started here (a sleeper or a CUDA client) and is killed first.
# shellcheck disable=SC2317 # run by cleanup
remove_cgroups() {
  local i dir pid try
  for ((i = ${#made_cgroups[@]} - 1; i >= 0; i--)); do
    dir=${made_cgroups[i]}
    [ -d "$dir" ] || continue
    for try in 1 2 3 4 5 6 7 8 9 10; do
      while read -r pid; do
        kill -9 "$pid" 2>/dev/null
      done <"$dir/cgroup.procs"
      rmdir "$dir" 2>/dev/null && break
      [ "$try" = 10 ] && echo "could not remove cgroup $dir" >&2
      sleep 0.2
    done
  done
  made_cgroups=()
}

# --- finding the driver -------------------------------------------------------------------

# find_nvml sets nvml_lib to the path of libnvidia-ml.so.1 (GPUSHARE_NVML_LIBRARY, else the
# dynamic loader's, else one in a usual driver folder; empty: none), and nvml_dir to its
# folder when the loader would not find it there by itself.
find_nvml() {
  nvml_lib="" nvml_dir=""
  if [ -n "${GPUSHARE_NVML_LIBRARY:-}" ]; then
    if [ -e "$GPUSHARE_NVML_LIBRARY" ]; then nvml_lib=$GPUSHARE_NVML_LIBRARY nvml_dir=${GPUSHARE_NVML_LIBRARY%/*}; fi
    return
  fi
  local ldconfig dir
  ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
  if [ -x "$ldconfig" ]; then
    nvml_lib=$("$ldconfig" -p 2>/dev/null | awk '$1 == "libnvidia-ml.so.1" { print $NF; exit }')
    [ -z "$nvml_lib" ] || return
  fi
  # Container images of NVIDIA's put the driver's libraries in /usr/local/nvidia/lib64.
  for dir in /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib; do
    if [ -e "$dir/libnvidia-ml.so.1" ]; then
      nvml_lib=$dir/libnvidia-ml.so.1 nvml_dir=$dir
      return
    fi
  done
}

# find_gpu sets driver, card_uuid, card_free_mib and cards_text, or no_gpu: nvidia-smi when it
# is on PATH, else NVML through hack/gpuaccept (built for that).
find_gpu() {
  if [ -n "${GPUSHARE_NVML_LIBRARY:-}" ] && [[ $GPUSHARE_NVML_LIBRARY != */libnvidia-ml.so.1 ]]; then
    echo "GPUSHARE_NVML_LIBRARY=$GPUSHARE_NVML_LIBRARY: want a path ending in /libnvidia-ml.so.1" >&2
    exit 2
  fi
  find_nvml
  if [ -n "$nvml_dir" ]; then
    # So that the hook, the tests and every NVML user here load this one.
    export LD_LIBRARY_PATH=$nvml_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  elif [ -n "${GPUSHARE_NVML_LIBRARY:-}" ]; then
    no_gpu="no $GPUSHARE_NVML_LIBRARY (GPUSHARE_NVML_LIBRARY)"
    return
  fi
  if command -v nvidia-smi >/dev/null 2>&1; then
    gpu_from_nvidia_smi
  elif [ -z "$nvml_lib" ]; then
    no_gpu="no nvidia-smi on PATH and no libnvidia-ml.so.1"
  else
    gpu_from_nvml "$nvml_lib"
  fi
}

gpu_from_nvidia_smi() {
  local out rc idx uuid total used name version
  out=$(timeout 30 nvidia-smi --query-gpu=index,uuid,memory.total,memory.used,name,driver_version \
    --format=csv,noheader,nounits 2>&1)
  rc=$?
  if [ "$rc" != 0 ] || [ -z "$out" ]; then
    no_gpu="nvidia-smi: $(first_line "${out:-lists no GPU (exit status $rc)}")"
    return
  fi
  printf '%s\n' "$out" | detail
  while IFS=, read -r idx uuid total used name version; do
    # Digits only: nvidia-smi writes [N/A] for what a card does not report.
    total=${total//[^0-9]/} used=${used//[^0-9]/}
    if [ -z "$card_uuid" ]; then
      card_uuid=${uuid// /}
      if [ -n "$total" ] && [ -n "$used" ]; then card_free_mib=$((total - used)); fi
      driver="${version// /} (nvidia-smi)"
    fi
    cards_text+="${cards_text:+, }card${idx// /} ${name# } ${total:-?} MiB"
  done <<<"$out"
}

gpu_from_nvml() {
  if ! ensure_tools; then
    no_gpu="libnvidia-ml.so.1 at $1 but no nvidia-smi, and hack/gpuaccept did not build: $tools_state"
    return
  fi
  local out idx uuid total used version
  if ! out=$(timeout 30 "$work/bin/gpuaccept" cards 2>&1) || [ -z "$out" ]; then
    no_gpu="NVML ($1): $(first_line "${out:-lists no GPU}")"
    return
  fi
  printf '%s\n' "$out" | detail
  version=$(timeout 30 "$work/bin/gpuaccept" driver 2>&1) || version="unknown ($version)"
  driver="$version (NVML)"
  while read -r idx uuid total used; do
    if [ -z "$card_uuid" ]; then
      card_uuid=$uuid
      card_free_mib=$((total - used))
    fi
    cards_text+="${cards_text:+, }card$idx $uuid $total MiB"
  done <<<"$out"
}

# --- building -----------------------------------------------------------------------------

# go_cmd prints the go command: PATH's, else the one Go's installer puts in /usr/local/go.
go_cmd() {
  command -v go 2>/dev/null || { [ -x /usr/local/go/bin/go ] && echo /usr/local/go/bin/go; }
}

# ensure_work makes the temporary folder.
ensure_work() {
  [ -n "$work" ] || work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-acceptance.XXXXXX")
}

# ensure_tools builds gpushare-limit-hook and hack/gpuaccept with cgo into $work/bin once;
# fails, tools_state saying why, when that cannot be done.
ensure_tools() {
  if [ -z "$tools_done" ]; then
    tools_done=1
    build_tools
  fi
  [ "$tools_state" = built ]
}

build_tools() {
  local go out
  go=$(go_cmd)
  if [ -z "$go" ]; then
    tools_state="no Go toolchain (go on PATH or /usr/local/go/bin/go)"
    return
  fi
  if ! command -v gcc >/dev/null 2>&1; then
    tools_state="no gcc: NVML needs a cgo build"
    return
  fi
  ensure_work
  echo "building gpushare-limit-hook and hack/gpuaccept (cgo) into $work/bin" >&2
  # As the Makefile builds the hook: its own go.mod, go-nvml's deprecation warnings quiet.
  if out=$(cd "$REPO" && GOWORK=off CGO_ENABLED=1 CGO_CFLAGS=${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations} \
    timeout "$(left "$BUILD_S")" "$go" build -o "$work/bin/" ./cmd/gpushare-limit-hook ./hack/gpuaccept 2>&1); then
    tools_state=built
  else
    printf '%s\n' "$out" | detail
    tools_state="go build failed: $(first_line "$out")"
  fi
}

# --- cgroups ------------------------------------------------------------------------------

# cgroup_unavailable prints why this run cannot make kubepods-like cgroups (nothing: it can).
cgroup_unavailable() {
  if [ "$(id -u)" != 0 ]; then
    echo "needs root (it makes cgroups under $CGROUP_ROOT)"
  elif [ ! -e "$CGROUP_ROOT/cgroup.controllers" ]; then
    echo "no cgroup v2 hierarchy at $CGROUP_ROOT (the driver's limits and this check need it)"
  fi
}

# new_container_cgroup makes $CGROUP_BASE/kubepods/pod<uid>/<container id>, a fresh pod UID and
# container ID, and sets pod_uid, ctr_id, ctr_cgroup (the path as /proc/<pid>/cgroup shows it)
# and ctr_dir. Fails, saying why, when a folder cannot be made.
new_container_cgroup() {
  pod_uid=$(cat /proc/sys/kernel/random/uuid)
  ctr_id=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
  local dir=$CGROUP_BASE sub
  for sub in kubepods "pod$pod_uid" "$ctr_id"; do
    dir=$dir/$sub
    if [ ! -d "$dir" ]; then
      mkdir "$dir" || return 1
      made_cgroups+=("$dir")
    fi
  done
  ctr_dir=$dir
  ctr_cgroup=${dir#"$CGROUP_ROOT"}
}

# ensure_cgroup_base makes $CGROUP_BASE (removed on exit when made here).
ensure_cgroup_base() {
  if [ ! -d "$CGROUP_BASE" ]; then
    mkdir "$CGROUP_BASE" || return 1
    made_cgroups+=("$CGROUP_BASE")
  fi
}

# start_in_cgroup DIR CMD... starts CMD in the background in cgroup DIR (it moves itself there
# before it execs) and sets started_pid once /proc shows it there.
start_in_cgroup() {
  local dir=$1 i
  shift
  (echo "$BASHPID" >"$dir/cgroup.procs" && exec "$@") &
  started_pid=$!
  bg_pids+=("$started_pid")
  for i in $(seq 50); do
    grep -q "::${dir#"$CGROUP_ROOT"}\$" "/proc/$started_pid/cgroup" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "process $started_pid did not reach cgroup $dir" >&2
  return 1
}

# --- CUDA client --------------------------------------------------------------------------

# cuda_client_missing prints why no CUDA client can run here (nothing: one can).
cuda_client_missing() {
  if ! command -v python3 >/dev/null 2>&1; then
    echo "no python3 for the CUDA client (hack/gpuaccept/cuda_alloc.py)"
  elif ! python3 -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' >/dev/null 2>&1; then
    echo "python3 cannot load the driver's libcuda.so.1"
  fi
}

# alloc_verdict LIMIT_MIB OUTPUT judges a client that allocated ALLOC_STEP_MIB at a time up
# to ALLOC_MAX_MIB under a limit of LIMIT_MIB: held when it was refused with at least half
# the limit allocated and no more than the limit (the CUDA context may count against it).
# Prints the verdict; fails when the limit did not hold.
alloc_verdict() {
  local limit=$1 out=$2 got refused err
  got=$(sed -n 's/^allocated=\([0-9]*\) .*/\1/p' <<<"$out")
  refused=$(sed -n 's/.* refused=\([a-z]*\) .*/\1/p' <<<"$out")
  err=$(sed -n 's/.* error=\(.*\)$/\1/p' <<<"$out")
  if [ -z "$got" ]; then
    echo "the CUDA client failed: $(first_line "$out")"
    return 1
  fi
  if [ "$refused" = no ]; then
    echo "the client allocated $got MiB under a ${limit} MiB limit"
    return 1
  fi
  if [ "$got" -gt "$limit" ] || [ "$got" -lt $((limit / 2)) ]; then
    echo "the client was refused ($err) after $got MiB, not near its ${limit} MiB limit"
    return 1
  fi
  echo "allocation refused ($err) after $got MiB of a ${limit} MiB limit"
}

# --- 1. gpu -------------------------------------------------------------------------------

check_gpu() {
  say PASS gpu "$cards_text; the checks use $card_uuid"
}

# --- 2. nvml-tests ------------------------------------------------------------------------

NVML_TESTS=(TestRealNVML TestRealProcessUtilization TestAllocateRealNVML TestAllocationSpecRealNVML)

check_nvml_tests() {
  local go out rc t missing="" failing
  go=$(go_cmd)
  if [ -z "$go" ]; then
    say SKIP nvml-tests "no Go toolchain (go on PATH or /usr/local/go/bin/go)"
    return
  fi
  if ! command -v gcc >/dev/null 2>&1; then
    say SKIP nvml-tests "no gcc: the real-NVML tests need cgo"
    return
  fi
  out=$(cd "$REPO" && GOWORK=off CGO_ENABLED=1 CGO_CFLAGS=${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations} \
    timeout "$(left 180)" "$go" test -tags nvml -count=1 -v \
    -run "^($(IFS='|' && echo "${NVML_TESTS[*]}"))\$" ./pkg/nvml/ ./pkg/deviceplugin/ 2>&1)
  rc=$?
  printf '%s\n' "$out" | detail
  if [ "$rc" = 124 ]; then
    say FAIL nvml-tests "timed out (build and run bounded by the time budget)"
    return
  fi
  failing=$(sed -n 's/^ *--- FAIL: \([^ ]*\).*/\1/p' <<<"$out" | tr '\n' ' ')
  failing=${failing% }
  for t in "${NVML_TESTS[@]}"; do
    grep -q -- "--- PASS: $t " <<<"$out" || missing+=" $t"
  done
  if [ "$rc" != 0 ] || [ -n "$missing" ]; then
    say FAIL nvml-tests "exit status $rc; failed: ${failing:-none}; not passed:${missing:- none}"
    return
  fi
  say PASS nvml-tests "${NVML_TESTS[*]}"
}

# --- 3. limit-hook ------------------------------------------------------------------------

check_limit_hook() {
  local why support src
  why=$(cgroup_unavailable)
  if [ -n "$why" ]; then
    say SKIP limit-hook "$why"
    return
  fi
  if ! ensure_tools; then
    say FAIL limit-hook "building the hook and hack/gpuaccept: $tools_state"
    return
  fi
  # What share-plugin would decide for this node: exit 3, no limit call (before R615); 4, the
  # call is there but NVMLSupport refuses; 0, it would publish isolation limit.
  support=$(timeout "$(left 30)" "$work/bin/gpuaccept" limit-support "$card_uuid" 2>&1)
  src=$?
  printf 'limit-support (exit status %s): %s\n' "$src" "$support" | detail
  if [ "$src" != 0 ] && [ "$src" != 3 ] && [ "$src" != 4 ]; then
    say FAIL limit-hook "asking NVML for the limit call: $(first_line "$support")"
    return
  fi
  if ! ensure_cgroup_base || ! new_container_cgroup; then
    say SKIP limit-hook "cannot make a cgroup under $CGROUP_BASE"
    return
  fi
  if ! start_in_cgroup "$ctr_dir" sleep 300; then
    say FAIL limit-hook "could not place a process in $ctr_cgroup"
    return
  fi
  run_hook "$started_pid"
  if [ "$src" = 0 ]; then
    judge_hook_set
  else
    judge_hook_refused "$src" "$support"
  fi
}

# run_hook PID runs gpushare-limit-hook as runc runs a createRuntime hook: the container state
# on stdin, the arguments share-plugin's CDI spec gives it (limithook.FormatArgs), bounded as
# the spec's hook entry bounds it (30 s). Sets hook_rc and hook_out.
run_hook() {
  local state args
  state=$(printf '{"ociVersion":"1.2.0","id":"%s","status":"created","pid":%d,"bundle":"%s"}' "$ctr_id" "$1" "$work")
  args=(--mode=nvml --deadline=20s "--failure-dir=$work/failures" "--pod-uid=$pod_uid"
    "--pod-limit=$card_uuid=$POD_LIMIT_MIB" "$card_uuid=$CTR_LIMIT_MIB")
  echo "hook: ${args[*]} <<< $state" | detail
  hook_out=$(timeout "$(left 30)" "$work/bin/gpushare-limit-hook" "${args[@]}" <<<"$state" 2>&1)
  hook_rc=$?
  printf 'hook exit status %s: %s\n' "$hook_rc" "$hook_out" | detail
}

# judge_hook_refused SUPPORT_EXIT SUPPORT_TEXT: the node cannot limit memory; the hook must
# have refused the container, naming the call or the driver it needs (fail closed).
judge_hook_refused() {
  local record="no failure record"
  if grep -qs '"reason":"unsupported"' "$work"/failures/*.json; then record="failure record: unsupported"; fi
  if [ "$hook_rc" = 0 ] && [ "$1" = 3 ]; then
    say FAIL limit-hook "the hook let the container start though the driver lacks nvmlDeviceSetMemoryLimits_v1"
  elif [ "$hook_rc" = 0 ]; then
    say FAIL limit-hook "share-plugin would not enforce limit here ($(first_line "$2")), yet the hook set the limits: the two disagree"
  elif [ "$1" = 3 ] && ! grep -qE 'nvmlDeviceSetMemoryLimits_v1|R615' <<<"$hook_out"; then
    say FAIL limit-hook "the driver lacks nvmlDeviceSetMemoryLimits_v1; the hook refused but without saying so: $(first_line "${hook_out:-exit status $hook_rc}")"
  elif [ "$1" = 3 ]; then
    say PASS limit-hook "driver lacks nvmlDeviceSetMemoryLimits_v1 (before R615): the hook refuses the container, naming it ($record)"
  else
    say PASS limit-hook "the driver has the call but share-plugin would not enforce limit here ($(first_line "$2")); the hook refuses the container too ($record)"
  fi
}

# judge_hook_set: the node can limit memory: the hook must have set the pod's and the
# container's limits, read back from the driver; then a client in the container's cgroup is
# refused memory beyond the container's limit.
judge_hook_set() {
  local ctr pod alloc why
  if [ "$hook_rc" != 0 ]; then
    say FAIL limit-hook "share-plugin would enforce limit here, but the hook failed (every container would fail to start): $(first_line "${hook_out:-exit status $hook_rc}")"
    return
  fi
  ctr=$(timeout "$(left 30)" "$work/bin/gpuaccept" limits "$card_uuid" "$ctr_dir" "$CTR_LIMIT_MIB" 2>&1)
  local crc=$?
  pod=$(timeout "$(left 30)" "$work/bin/gpuaccept" limits "$card_uuid" "${ctr_dir%/*}" "$POD_LIMIT_MIB" 2>&1)
  local prc=$?
  printf 'container: %s\npod: %s\n' "$ctr" "$pod" | detail
  if [ "$crc" != 0 ] || [ "$prc" != 0 ]; then
    say FAIL limit-hook "the hook succeeded, but reading the limits back: container: $(first_line "$ctr"); pod: $(first_line "$pod")"
    return
  fi
  why=$(cuda_client_missing)
  if [ -z "$why" ] && [ "$card_free_mib" -lt $((ALLOC_MAX_MIB + 1024)) ]; then
    why="card has $card_free_mib MiB free, the client needs $((ALLOC_MAX_MIB + 1024))"
  fi
  if [ -n "$why" ]; then
    say PASS limit-hook "limits set and read back (container ${CTR_LIMIT_MIB} MiB, pod ${POD_LIMIT_MIB} MiB); allocation beyond the limit: SKIP, $why"
    return
  fi
  alloc=$(limited_client)
  printf 'client in the container cgroup: %s\n' "$alloc" | detail
  if why=$(alloc_verdict "$CTR_LIMIT_MIB" "$alloc"); then
    say PASS limit-hook "limits set and read back (container ${CTR_LIMIT_MIB} MiB, pod ${POD_LIMIT_MIB} MiB); $why"
  else
    say FAIL limit-hook "limits set and read back, but $why"
  fi
}

# limited_client runs the CUDA client in the container's cgroup (a second process of the
# "container", as its application would be) and prints its output.
limited_client() {
  (echo "$BASHPID" >"$ctr_dir/cgroup.procs" &&
    CUDA_VISIBLE_DEVICES=$card_uuid exec timeout "$(left 60)" python3 "$ALLOC" "$ALLOC_STEP_MIB" "$ALLOC_MAX_MIB" 0) 2>&1
}

# --- 4. usage-watchdog --------------------------------------------------------------------

check_usage_watchdog() {
  local why out rc
  why=$(cgroup_unavailable)
  [ -n "$why" ] || why=$(cuda_client_missing)
  if [ -n "$why" ]; then
    say SKIP usage-watchdog "$why"
    return
  fi
  if ! ensure_tools; then
    say FAIL usage-watchdog "building hack/gpuaccept: $tools_state"
    return
  fi
  if ! ensure_cgroup_base || ! new_container_cgroup; then
    say SKIP usage-watchdog "cannot make a cgroup under $CGROUP_BASE"
    return
  fi
  ensure_work
  # 256 MiB, held while the helper looks (the process is killed after).
  if ! start_in_cgroup "$ctr_dir" env "CUDA_VISIBLE_DEVICES=$card_uuid" python3 "$ALLOC" 256 256 120 >"$work/watchdog.out" 2>&1; then
    say FAIL usage-watchdog "could not place the CUDA client in $ctr_cgroup"
    return
  fi
  for _ in $(seq "$(left 30)"); do
    grep -q '^allocated=' "$work/watchdog.out" && break
    kill -0 "$started_pid" 2>/dev/null || break
    sleep 1
  done
  detail <"$work/watchdog.out"
  if ! grep -q '^allocated=256 ' "$work/watchdog.out"; then
    say FAIL usage-watchdog "the CUDA client did not allocate 256 MiB: $(first_line "$(cat "$work/watchdog.out")")"
    return
  fi
  out=$(timeout "$(left 30)" "$work/bin/gpuaccept" attribute "$started_pid" "$pod_uid" "$ctr_id" 2>&1)
  rc=$?
  printf '%s\n' "$out" | detail
  kill "$started_pid" 2>/dev/null
  if [ "$rc" = 0 ]; then
    say PASS usage-watchdog "$(first_line "$out")"
  else
    say FAIL usage-watchdog "$(first_line "$out")"
  fi
}

# --- 5. mps -------------------------------------------------------------------------------

# mps_control CMD sends CMD to the daemon started here.
mps_control() {
  env "${mps_env[@]}" timeout 10 nvidia-cuda-mps-control <<<"$1"
}

# stop_mps tells the daemon started here to quit (its servers with it), then kills what is left.
stop_mps() {
  [ ${#mps_env[@]} -gt 0 ] || return 0
  mps_control quit >/dev/null 2>&1
  local i
  for i in $(seq 20); do
    kill -0 "$mps_pid" 2>/dev/null || break
    sleep 0.25
  done
  kill "$mps_pid" 2>/dev/null
  mps_env=()
}

check_mps() {
  local why dir out verdict
  if ! command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
    say SKIP mps "no nvidia-cuda-mps-control on PATH"
    return
  fi
  if [ "$(id -u)" != 0 ]; then
    say SKIP mps "needs root (the client gets a read-only pipe folder in a mount namespace)"
    return
  fi
  ensure_work
  dir=$work/mps
  mkdir -p "$dir/pipe" "$dir/log"
  # As gpushare-mps runs one: a daemon for the card, folders of its own (not the host's
  # default /tmp/nvidia-mps, so no other CUDA process on this machine connects to it).
  mps_env=("CUDA_VISIBLE_DEVICES=$card_uuid" "CUDA_MPS_PIPE_DIRECTORY=$dir/pipe" "CUDA_MPS_LOG_DIRECTORY=$dir/log")
  env "${mps_env[@]}" nvidia-cuda-mps-control -f >"$dir/daemon.out" 2>&1 &
  mps_pid=$!
  for _ in $(seq "$(left 15)"); do
    mps_control get_server_list >/dev/null 2>&1 && break
    sleep 1
  done
  if ! mps_control get_server_list >/dev/null 2>&1; then
    detail <"$dir/daemon.out"
    say FAIL mps "the control daemon did not answer within 15 s"
    stop_mps
    return
  fi
  # The cap on the server side, as gpushare-mps sets it for a grant.
  if ! out=$(mps_control "set_default_device_pinned_mem_limit 0 ${CTR_LIMIT_MIB}M" 2>&1) || [ -n "$out" ]; then
    printf 'set_default_device_pinned_mem_limit: %s\n' "$out" | detail
    say FAIL mps "the control daemon refused set_default_device_pinned_mem_limit 0 ${CTR_LIMIT_MIB}M: $(first_line "$out")"
    stop_mps
    return
  fi
  why=$(cuda_client_missing)
  if [ -z "$why" ] && [ "$card_free_mib" -lt $((ALLOC_MAX_MIB + 1024)) ]; then
    why="card has $card_free_mib MiB free, the client needs $((ALLOC_MAX_MIB + 1024))"
  fi
  if [ -n "$why" ]; then
    stop_mps
    say SKIP mps "the daemon started and answered; no client run: $why"
    return
  fi
  out=$(mps_client "$dir")
  printf 'MPS client: %s\n' "$out" | detail
  local kinds
  kinds=$(mps_kinds "$dir")
  printf 'NVML kinds: %s\n' "$kinds" | detail
  stop_mps
  # The daemon in the foreground (-f) may write its log to its output rather than control.log.
  cat "$dir/log/control.log" "$dir/daemon.out" 2>/dev/null | detail
  if grep -q 'pipe folder writable' <<<"$out"; then
    say FAIL mps "could not make the pipe folder read-only for the client: $(first_line "$out")"
  elif ! cat "$dir/log/control.log" "$dir/daemon.out" 2>/dev/null | grep -qi 'new client'; then
    say FAIL mps "the client did not connect through the read-only pipe folder (no NEW CLIENT in control.log): $(first_line "$out")"
  elif [ "$kinds" != "client=mps bypass=direct" ]; then
    say FAIL mps "the usage watchdog's reading of NVML cannot tell an MPS client from a process that bypassed MPS: $kinds (want client=mps bypass=direct)"
  elif verdict=$(alloc_verdict "$CTR_LIMIT_MIB" "$out"); then
    say PASS mps "client connected through a read-only pipe folder; server cap ${CTR_LIMIT_MIB}M held against the client's own 0=$((CTR_LIMIT_MIB * 4))M: $verdict; NVML lists a client as mps and a process that bypassed MPS as direct (an escape)"
  else
    say FAIL mps "client connected, but $verdict"
  fi
}

# mps_kinds DIR holds 256 MiB for a few seconds in two clients, one through the daemon and one
# whose pipe folder is empty (it bypasses MPS, as a tenant's escape does), and prints how the
# usage watchdog's NVML reading (hack/gpuaccept kind) lists each: "client=<kind> bypass=<kind>".
mps_kinds() {
  local dir=$1 client bypass k1 k2
  mkdir -p "$dir/empty"
  if ! ensure_tools; then
    echo "tools: $tools_state"
    return
  fi
  env "${mps_env[@]}" timeout 30 python3 "$ALLOC" 256 256 8 >/dev/null 2>&1 &
  client=$!
  env "CUDA_VISIBLE_DEVICES=$card_uuid" "CUDA_MPS_PIPE_DIRECTORY=$dir/empty" timeout 30 python3 "$ALLOC" 256 256 8 >/dev/null 2>&1 &
  bypass=$!
  k1=$(timeout 15 "$work/bin/gpuaccept" kind "$(child_of "$client")" 2>&1 | head -1)
  k2=$(timeout 15 "$work/bin/gpuaccept" kind "$(child_of "$bypass")" 2>&1 | head -1)
  wait "$client" "$bypass" 2>/dev/null
  echo "client=$k1 bypass=$k2"
}

# child_of PID is the python process timeout PID runs (timeout forks it), else PID.
child_of() {
  local c
  sleep 0.5
  read -r c _ <"/proc/$1/task/$1/children" 2>/dev/null
  echo "${c:-$1}"
}

# mps_client DIR runs the CUDA client as Allocate sets up a container on an mps node: the
# pipe and log folders bind-mounted read-only (in a mount namespace of its own), the card
# being its device 0, and, as a tenant that raised it, four times its grant as its own
# CUDA_MPS_PINNED_DEVICE_MEM_LIMIT: the daemon's cap must hold. Prints its output.
mps_client() {
  local dir=$1
  # shellcheck disable=SC2016 # $1 and $2 are the inner shell's: the two folders
  env "${mps_env[@]}" "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=$((CTR_LIMIT_MIB * 4))M" \
    timeout "$(left 60)" unshare --mount --propagation private -- /bin/sh -c '
      for d in "$1" "$2"; do mount --bind "$d" "$d" && mount -o remount,bind,ro "$d" || exit 1; done
      if touch "$1/.write-probe" 2>/dev/null; then echo "pipe folder writable"; exit 1; fi
      shift 2; exec "$@"' sh "$dir/pipe" "$dir/log" \
    python3 "$ALLOC" "$ALLOC_STEP_MIB" "$ALLOC_MAX_MIB" 0 2>&1
}

# --- 6. preflight -------------------------------------------------------------------------

check_preflight() {
  local out
  if ! ensure_tools; then
    say FAIL preflight "building hack/gpuaccept: $tools_state"
    return
  fi
  if out=$(timeout "$(left 30)" "$work/bin/gpuaccept" preflight "$RUNTIME_CONFIG" 2>&1); then
    say PASS preflight "$(first_line "$out")"
  else
    say FAIL preflight "$(first_line "$out")"
  fi
}

# --- main ---------------------------------------------------------------------------------

# should_run CHECK NEED_S says whether CHECK runs: on a machine with a GPU, with NEED_S seconds
# of the budget left at least. Otherwise it prints the check's SKIP line.
should_run() {
  if [ -n "$no_gpu" ]; then
    say SKIP "$1" "no NVIDIA GPU/driver ($no_gpu)"
  elif [ $((BUDGET_S - SECONDS)) -lt "$2" ]; then
    say SKIP "$1" "time budget spent (${BUDGET_S} s)"
  else
    echo "--- $1" >&2
    return 0
  fi
  return 1
}

find_gpu
if [ -n "$no_gpu" ]; then
  echo "driver: none"
else
  echo "driver: $driver"
fi
should_run gpu 0 && check_gpu
should_run nvml-tests 30 && check_nvml_tests
should_run limit-hook 30 && check_limit_hook
should_run usage-watchdog 20 && check_usage_watchdog
should_run mps 30 && check_mps
should_run preflight 5 && check_preflight
exit "$failed"
