//go:build e2e

package e2e

import (
	"testing"
	"time"
)

// lateBindingDelay is how long the proxy in front of the API server holds extender-a's
// Bindings: longer than any write a leader may start under failoverLeaseArgs (it must end
// within the renew deadline, 4 s, of the last renewal), shorter than the bind timeout
// (30 s) that bounded it before.
const lateBindingDelay = 20 * time.Second

// CaseFailoverLateBinding: the leader's Binding is in transit (a proxy in front of the API
// server holds it) when the leader stops being able to renew its lease (the same proxy
// refuses its Lease writes) while its process lives on. The standby takes over and the two
// 12-unit pods of a 16-unit card go to it. The old leader's Binding must never reach the API
// server (its deadline ends with the lease it could prove, so the proxy drops it), exactly
// one pod is bound, no card is over capacity, and the old leader exits once its binds ended.
func CaseFailoverLateBinding(t *testing.T, e *Env) {
	requireBinary(t, e, "extender", "kubectl-inspect-gpushare")
	ctx := testContext(t, 5*time.Minute)
	api := startBindingDelayProxy(t, e, lateBindingDelay)
	replicas := replicaPair(ctx, t, e)
	a, b := replicas[0], replicas[1]
	// extender-a reaches the API server through the proxy; after losing the lease it waits
	// for its binds to end, however long (a stalled process would not exit either).
	a.kubeconfig, a.args = api.kubeconfig, []string{"--shutdown-timeout=2m"}
	proxy := newReadinessProxy(t, e, replicas)
	startReplica(t, e, a)
	waitFor(ctx, t, time.Minute, "extender-a to lead", func() bool { return proxy.ready() == a })
	startReplica(t, e, b)

	ns := newNamespace(t, e)
	node := newKwokNode(t, e, "latebind", v100)
	createPod(t, e, gpuPod(ns, "slow", node, ctr{units: 12}))
	waitFor(ctx, t, time.Minute, "extender-a's Binding of slow held in transit", func() bool { return api.held.Load() > 0 })
	api.cutLeases.Store(true)
	lost := time.Now()
	waitFor(ctx, t, time.Minute, "extender-b to lead", func() bool { return proxy.ready() == b })
	t.Logf("extender-b leads %s after extender-a's lease writes were cut", time.Since(lost).Round(100*time.Millisecond))
	waitFor(ctx, t, 30*time.Second, "extender-a to exit after losing the lease", func() bool {
		select {
		case <-a.done:
			return true
		default:
			return false
		}
	})
	createPod(t, e, gpuPod(ns, "rival", node, ctr{units: 12}))

	// Every Binding extender-a sent is forwarded lateBindingDelay after it was sent, or
	// dropped: wait for them all, then for the pods to settle.
	waitFor(ctx, t, lateBindingDelay+30*time.Second, "extender-a's held Bindings to be forwarded or dropped", func() bool {
		return api.forwarded.Load()+api.dropped.Load() >= api.held.Load()
	})
	t.Logf("extender-a's Bindings: %d held, %d dropped, %d forwarded", api.held.Load(), api.dropped.Load(), api.forwarded.Load())
	if n := api.forwarded.Load(); n != 0 {
		t.Errorf("%d of extender-a's Bindings reached the API server after its lease could have ended, want none", n)
	}
	if bound := waitSettled(ctx, t, e, ns, "", 2*time.Minute); bound != 1 {
		t.Errorf("%d of slow and rival bound on one 16-unit card, want 1", bound)
	}
	assertLedgerSound(t, e)
}
