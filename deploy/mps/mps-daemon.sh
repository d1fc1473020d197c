#!/bin/bash
# Entry script of the gpushare MPS daemon (deploy/mps): one NVIDIA MPS control daemon per card
# of the node, each serving only its card, with its folders under $GPUSHARE_MPS_ROOT/<UUID>:
#   pipe/   the daemon's pipes and sockets (CUDA_MPS_PIPE_DIRECTORY of the daemon and clients)
#   log/    control.log and server.log (CUDA_MPS_LOG_DIRECTORY)
#   shm/    a tmpfs of $GPUSHARE_MPS_SHM_SIZE, the daemon's and its clients' /dev/shm
#   ready   present while the daemon answers; share-plugin refuses containers otherwise
# share-plugin hands these folders to each container of an isolation=mps node, with the
# container's grant as CUDA_MPS_PINNED_DEVICE_MEM_LIMIT (docs/isolation.md). The script exits,
# and the pod restarts, when any daemon stops; on SIGTERM it tells every daemon to quit.
# This file is the source: the chart's files/mps-daemon.sh is a byte copy (Helm packages only
# the chart's folder), which test/manifests compares with it.
set -o errexit -o nounset -o pipefail

root=${GPUSHARE_MPS_ROOT:-/run/gpushare/mps}
shm_size=${GPUSHARE_MPS_SHM_SIZE:-64m}
ready_wait=${GPUSHARE_MPS_READY_WAIT:-30}

log() { echo "gpushare-mps: $*" >&2; }

# control sends one command to the daemon of card $1.
control() {
	CUDA_MPS_PIPE_DIRECTORY="$root/$1/pipe" CUDA_MPS_LOG_DIRECTORY="$root/$1/log" \
		nvidia-cuda-mps-control <<<"$2"
}

mapfile -t uuids < <(nvidia-smi --query-gpu=uuid --format=csv,noheader | tr -d ' ')
if [ "${#uuids[@]}" -eq 0 ] || [ -z "${uuids[0]}" ]; then
	log "nvidia-smi lists no GPU: is the NVIDIA runtime giving this container the cards?"
	exit 1
fi

stop() {
	for u in "${uuids[@]}"; do
		rm -f "$root/$u/ready"
		control "$u" quit >/dev/null 2>&1 || true
	done
	wait || true
}
trap 'log "stopping"; stop; exit 0' TERM INT

for u in "${uuids[@]}"; do
	case $u in
	GPU-*) ;;
	*)
		log "unexpected card UUID '$u'"
		exit 1
		;;
	esac
	d=$root/$u
	rm -f "$d/ready"
	mkdir -p "$d/pipe" "$d/log" "$d/shm"
	# A tmpfs of its own, seen on the host through the Bidirectional mount, so that clients'
	# /dev/shm is bounded and holds nothing but this card's MPS traffic. A restarted pod keeps
	# the one its clients already use.
	if ! mountpoint -q "$d/shm"; then
		mount -t tmpfs -o "rw,nosuid,nodev,noexec,mode=1777,size=$shm_size" tmpfs "$d/shm"
	fi
	# The daemon, and the servers it starts, see the card alone and that tmpfs as /dev/shm,
	# in a mount namespace of their own.
	# shellcheck disable=SC2016 # $1 is the inner shell's: the tmpfs folder
	CUDA_VISIBLE_DEVICES=$u CUDA_MPS_PIPE_DIRECTORY=$d/pipe CUDA_MPS_LOG_DIRECTORY=$d/log \
		unshare --mount --propagation private -- \
		/bin/sh -c 'mount --bind "$1" /dev/shm && exec nvidia-cuda-mps-control -f' sh "$d/shm" &
	log "card $u: control daemon started (pid $!)"
done

for u in "${uuids[@]}"; do
	for ((i = 0; ; i++)); do
		if control "$u" get_server_list >/dev/null 2>&1; then
			touch "$root/$u/ready"
			log "card $u: ready"
			break
		fi
		if [ "$i" -ge "$ready_wait" ]; then
			log "card $u: the control daemon did not answer within ${ready_wait}s"
			stop
			exit 1
		fi
		sleep 1
	done
done

# Any daemon that stops leaves its card unlimited for new clients: exit so that kubelet
# restarts the pod (the trap is not called for this exit; stop the others first).
set +o errexit
wait -n
log "a control daemon exited; stopping the others"
stop
exit 1
