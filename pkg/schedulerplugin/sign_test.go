package schedulerplugin

import (
	"context"
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

func TestSignPod(t *testing.T) {
	ctx := context.Background()
	sign := func(t *testing.T, pl *Plugin, pod *v1.Pod) (string, *fwk.Status) {
		t.Helper()
		frags, status := pl.SignPod(ctx, pod)
		if !status.IsSuccess() {
			return "", status
		}
		b, err := json.Marshal(frags)
		if err != nil {
			t.Fatal(err)
		}
		return string(b), nil
	}
	twoCards := ct.Pod("b", 8)
	ct.SetGPU(&twoCards.Spec.Containers[0], 8, 2)
	invalid := ct.Pod("bad", 0)
	ct.SetGPU(&invalid.Spec.Containers[0], 10, 3)

	f := start(t, &GPUShareArgs{Policy: "binpack"}, ct.Node("n1", 16))
	a1, _ := sign(t, f.pl, ct.Pod("a1", 4))
	a2, _ := sign(t, f.pl, ct.Pod("a2", 4))
	b, _ := sign(t, f.pl, twoCards)
	c, _ := sign(t, f.pl, ct.Pod("c", 5))
	if a1 == "" || a1 != a2 {
		t.Fatalf("same request, different signatures: %s vs %s", a1, a2)
	}
	if a1 == b || a1 == c {
		t.Fatalf("different requests, same signature: %s, %s, %s", a1, b, c)
	}
	// A memory limit decides which nodes take the pod: it is part of the signature.
	limited := ct.Pod("l", 4)
	limited.Annotations = map[string]string{gpushare.AnnotationMemLimit: "main=8"}
	if l, _ := sign(t, f.pl, limited); l == "" || l == a1 {
		t.Fatalf("a pod with a memory limit signs %q, as one without: %s", l, a1)
	}
	// So does a compute share.
	core := ct.Pod("core", 4)
	core.Annotations = map[string]string{gpushare.AnnotationComputeShare: "main=25"}
	if s, _ := sign(t, f.pl, core); s == "" || s == a1 {
		t.Fatalf("a pod with a compute share signs %q, as one without: %s", s, a1)
	}
	if _, status := sign(t, f.pl, invalid); status.Code() != fwk.Unschedulable {
		t.Fatalf("invalid request: SignPod = %v, want Unschedulable", status)
	}

	if _, status := sign(t, f.pl, claimPod("claims", "notebook")); status.Code() != fwk.Unschedulable {
		t.Fatalf("pod with claims: SignPod = %v, want Unschedulable", status)
	}

	// A pod whose earlier bind holds cards is not batched.
	held := ct.Pod("held", 4)
	st, _, _ := f.prefilter(t, held)
	if s := f.pl.Reserve(ctx, st, held, "n1"); !s.IsSuccess() {
		t.Fatal(s)
	}
	if _, status := sign(t, f.pl, held); status.Code() != fwk.Unschedulable {
		t.Fatalf("held pod: SignPod = %v, want Unschedulable", status)
	}

	// fgd rates nodes by the cluster's workload: never batched.
	g := start(t, &GPUShareArgs{Policy: "fgd"}, ct.Node("n1", 16))
	if _, status := sign(t, g.pl, ct.Pod("a", 4)); status.Code() != fwk.Unschedulable {
		t.Fatalf("fgd: SignPod = %v, want Unschedulable", status)
	}
}
