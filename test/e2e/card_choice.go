//go:build e2e

package e2e

import (
	"testing"
	"time"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// CaseCardChoice: on a node with a V100 (card 0) and an A100 (card 1), a pod asking for
// A100s by the HAMi annotation gets card 1 although binpack alone would take the fuller
// V100, and a pod asking for H100s stays Pending with the reason naming the type.
func CaseCardChoice(t *testing.T, e *Env) {
	requireBinary(t, e, "extender")
	cardChoice(t, e, "")
}

// CasePluginCardChoice is CaseCardChoice through gpushare-scheduler.
func CasePluginCardChoice(t *testing.T, e *Env) {
	requireBinary(t, e, "gpushare-scheduler")
	cardChoice(t, e, PluginSchedulerName)
}

func cardChoice(t *testing.T, e *Env, sched string) {
	ns := newNamespace(t, e)
	node := newKwokNode(t, e, "cardchoice", v100, a100)
	a := gpuPod(ns, "a100", node, ctr{units: 8})
	a.Annotations = map[string]string{gpushare.AnnotationHAMiUseGPUType: "A100"}
	createPod(t, e, scheduledBy(sched, a))
	wantCardUsage(t, waitPod(t, e, ns, "a100", time.Minute, "Running", isRunning), gpushare.CardUnits{1: 8})
	h := gpuPod(ns, "h100", node, ctr{units: 8})
	h.Annotations = map[string]string{gpushare.AnnotationUseGPUType: "H100"}
	createPod(t, e, scheduledBy(sched, h))
	msg := waitFailedScheduling(t, e, ns, "h100", "no card of type H100 on this node (its cards: Tesla V100-SXM2-16GB, NVIDIA A100-PCIE-40GB)")
	t.Logf("h100 is Pending: %s", msg)
}
