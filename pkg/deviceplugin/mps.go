package deviceplugin

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/mps"
)

// mpsReleaseInterval is how often the wants of daemons no pod holds are removed.
const mpsReleaseInterval = 15 * time.Second

// mpsCap is the cap of a container holding units gpu-mem units on one card of an MPS node
// with a compute share of pct percent (gpushare.AnnotationComputeShare; 0 for none): its
// grant in MiB and that share of the card's SMs, every SM without a share. Containers with
// the same grant and share use one daemon.
func (p *Plugin) mpsCap(units int64, pct uint8) mps.Cap {
	threads := gpushare.MaxComputeShare
	if pct > 0 {
		threads = int(pct)
	}
	return mps.Cap{PinnedMemMiB: units * p.node.Unit().MiB, ActiveThreadPct: threads}
}

// mpsResponse is what a container on card c holding units gpu-mem units there needs to run
// as a client of the MPS control daemon that holds clients to that grant on that card
// (pkg/mps; gpushare-mps runs it, deploy/mps), and to the container's compute share: Allocate
// asks for the daemon and waits until it is ready, so the cap is set on the server side
// before the container starts. The container
// gets the daemon's pipe folder (read-only, at the host path, so the paths the daemon and its
// clients use are the same in every mount namespace), the daemon's shared memory as /dev/shm,
// and its grant as CUDA_MPS_PINNED_DEVICE_MEM_LIMIT too (a client's own limit can lower the
// daemon's, never raise it). The pipe folder is read-only: a container that could remove,
// rename or replace the daemon's pipes and sockets could cut its neighbours off MPS or put
// its own listener in the daemon's place; a read-only mount still lets a client open FIFOs
// and connect to sockets. Errors (*refusal): the container is not on exactly one card, its
// card has no room for its compute share (mpsComputeRoom), or its daemon is not ready within
// MPSReadyTimeout: a container started without its daemon would run unlimited.
func (p *Plugin) mpsResponse(ctx context.Context, cand candidate, d cardDecision) (map[string]string, []*pluginapi.Mount, error) {
	cards, units := d.cards, d.units
	if len(cards) != 1 {
		return nil, nil, &refusal{msg: fmt.Sprintf("refusing container %q of pod %s: node isolates cards with MPS (%s=%s), which serves one card per container, and the container has %d",
			cand.cont.Name, klog.KObj(cand.pod), gpushare.LabelIsolation, gpushare.IsolationMPS, len(cards))}
	}
	c := cards[0]
	if r := p.mpsComputeRoom(cand, c, d.alloc); r != nil {
		return nil, nil, r
	}
	f, err := mps.FolderOf(p.cfg.MPSRoot, c.UUID, p.mpsCap(units[0], cand.cont.Compute))
	if err == nil {
		if r := p.mpsRoomForDaemon(cand, f, c, d.alloc); r != nil {
			return nil, nil, r
		}
		err = mps.Request(f, p.node.Clock().Now())
	}
	if err == nil {
		wctx, cancel := context.WithTimeout(ctx, p.cfg.MPSReadyTimeout)
		_, err = mps.AwaitReady(wctx, f, 50*time.Millisecond, p.node.Clock().Now)
		cancel()
	}
	if err != nil {
		return nil, nil, &refusal{msg: fmt.Sprintf("refusing container %q of pod %s: no MPS daemon ready for its grant on card %d (%s) within %s: %v; is deploy/mps (gpushare-mps) running on node %s?",
			cand.cont.Name, klog.KObj(cand.pod), c.Index, c.UUID, p.cfg.MPSReadyTimeout, err, p.node.Name())}
	}
	env := map[string]string{
		// The container sees its one card as device 0, whatever its index on the node.
		gpushare.EnvMPSPinnedMemLimit: gpushare.MPSMemLimit(f.Cap.PinnedMemMiB),
		gpushare.EnvMPSPipeDirectory:  f.Pipe(),
	}
	mounts := []*pluginapi.Mount{
		{ContainerPath: f.Pipe(), HostPath: f.Pipe(), ReadOnly: true},
		// MPS clients and their server exchange data through POSIX shared memory, so the
		// container's /dev/shm is the one of its daemon (NVIDIA's device plugin mounts its
		// daemon's the same way).
		{ContainerPath: "/dev/shm", HostPath: f.Shm()},
	}
	return env, mounts, nil
}

// mpsRoomForDaemon counts the overhead of MPS daemons against card c (MPSDaemonOverheadMiB
// each): a container whose grant needs a daemon the card does not run yet is refused when
// the card's grants (the node's running pods', alloc for cand's pod) and one more daemon's
// overhead beside the daemons already wanted there exceed the card's memory. A container
// whose daemon runs already, or a zero overhead, passes. Errors: *refusal.
func (p *Plugin) mpsRoomForDaemon(cand candidate, f mps.Folder, c gpushare.Device, alloc gpushare.PodAllocation) error {
	overhead := p.cfg.MPSDaemonOverheadMiB
	if overhead <= 0 {
		return nil
	}
	entries, _, err := mps.Scan(p.cfg.MPSRoot)
	if err != nil {
		return &refusal{msg: fmt.Sprintf("refusing container %q of pod %s: cannot count the MPS daemons of card %d: %v", cand.cont.Name, klog.KObj(cand.pod), c.Index, err)}
	}
	daemons := int64(0)
	for _, e := range entries {
		if e.Folder.Card != c.UUID || e.Want == nil {
			continue
		}
		if e.Folder.Key() == f.Key() {
			return nil
		}
		daemons++
	}
	units := unitsOn(alloc, c.Index)
	for _, g := range (usageLedger{p}).Grants() {
		if g.Pod.UID != cand.pod.UID && g.Pod.Status.Phase != corev1.PodSucceeded && g.Pod.Status.Phase != corev1.PodFailed {
			units += unitsOn(g.Grant, c.Index)
		}
	}
	need := units*p.node.Unit().MiB + (daemons+1)*overhead
	if need <= c.MemoryMiB {
		return nil
	}
	return &refusal{msg: fmt.Sprintf("refusing container %q of pod %s: its grant needs an MPS daemon of its own on card %d (%s), and the card's grants (%d MiB) with %d daemons' overhead (%d MiB each, --mps-daemon-overhead-mib) would need %d MiB of its %d MiB",
		cand.cont.Name, klog.KObj(cand.pod), c.Index, c.UUID, units*p.node.Unit().MiB, daemons+1, overhead, need, c.MemoryMiB)}
}

// unitsOn is a pod's units on card index i at any one time: its app containers' sum, or its
// largest init container's, which run one at a time before them (the effective-request rule).
func unitsOn(a gpushare.PodAllocation, i int) int64 {
	var app, init int64
	for _, cu := range a.App {
		app += cu[i]
	}
	for _, cu := range a.Init {
		init = max(init, cu[i])
	}
	return max(app, init)
}

// releaseMPSDaemons removes the wants of the daemons no pod of the node holds any more (so that
// gpushare-mps stops them), keeping those asked for within MPSReleaseGrace. A pod holds the
// daemon of each card and grant of its containers until it ends (phase Succeeded or Failed)
// or is gone. It returns how many wants it removed.
func (p *Plugin) releaseMPSDaemons() int {
	entries, problems, err := mps.Scan(p.cfg.MPSRoot)
	if err != nil {
		klog.ErrorS(err, "Cannot read the MPS root; no MPS daemon released")
		return 0
	}
	for _, e := range problems {
		klog.V(2).InfoS("Ignoring an MPS folder", "err", e)
	}
	held := p.heldMPSDaemons()
	now := p.node.Clock().Now()
	n := 0
	for _, e := range entries {
		if e.Want == nil || held[e.Folder.Key()] || now.Sub(e.Want.Since) < p.cfg.MPSReleaseGrace {
			continue
		}
		if err := mps.Release(e.Folder); err != nil {
			klog.ErrorS(err, "Cannot release an MPS daemon")
			continue
		}
		klog.InfoS("Released an MPS daemon no pod holds", "daemon", e.Folder.Key(), "askedAt", e.Want.Since)
		n++
	}
	return n
}

// heldMPSDaemons is the daemons the node's running pods hold: for each gpu-mem container, the
// cap of its grant and compute share (mpsCap) on each of its cards.
func (p *Plugin) heldMPSDaemons() map[mps.Key]bool {
	held := map[mps.Key]bool{}
	for _, g := range (usageLedger{p}).Grants() {
		if g.Pod.Status.Phase == corev1.PodSucceeded || g.Pod.Status.Phase == corev1.PodFailed {
			continue
		}
		shares := computeSharesOf(g.Pod)
		for _, a := range []struct {
			init bool
			m    gpushare.Allocation
		}{{false, g.Grant.App}, {true, g.Grant.Init}} {
			for idx, cu := range a.m {
				pct := shares[gpushare.ContainerRef{InitList: a.init, Index: idx}]
				for i, units := range cu {
					if card, ok := p.cards.ByIndex(i); ok && units > 0 {
						held[mps.Key{Card: card.UUID, Cap: p.mpsCap(units, pct)}] = true
					}
				}
			}
		}
	}
	return held
}

// keepMPSDaemonsReleased runs releaseMPSDaemons every interval until ctx ends.
func (p *Plugin) keepMPSDaemonsReleased(ctx context.Context, interval time.Duration) {
	t := p.node.Clock().NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			p.releaseMPSDaemons()
		}
	}
}
