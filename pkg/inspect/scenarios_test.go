package inspect

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// Cluster contents shared by the golden command tests. Each comment gives the arithmetic
// the golden output must show.

// referenceScenario is the cloud product's user guide: one T4 (15079 MiB → 14 GiB units),
// three notebooks of 4 → 12/14 (85%, floor of 85.7). The pods use both annotation forms:
// per-container JSON and the old single-card index. A finished pod and a pod without
// gpu-mem must not count.
func referenceScenario(t *testing.T) []runtime.Object {
	return []runtime.Object{
		makeNode("cn-shanghai.i-uf61h64dz1tmlob9hmtb", "192.168.0.71").Sharing().
			Inventory(t, gpushare.GiB, t4(0)).Obj(),
		makeNode("cpu-1", "192.168.0.80").Obj(),
		makePod("default", "tf-notebook-5f7d9c8b6-2xk4q").Node("cn-shanghai.i-uf61h64dz1tmlob9hmtb").GPU(4, 0).Alloc(`{"0":{"0":4}}`).Obj(),
		makePod("default", "tf-notebook-2-7c9f5d6f4-8mz7w").Node("cn-shanghai.i-uf61h64dz1tmlob9hmtb").GPU(4, 0).Alloc(`{"0":{"0":4}}`).Obj(),
		makePod("default", "tf-notebook-3-6d8b7c9f5-q4r2n").Node("cn-shanghai.i-uf61h64dz1tmlob9hmtb").GPU(4, 0).Index("0").Obj(),
		makePod("default", "old-job").Node("cn-shanghai.i-uf61h64dz1tmlob9hmtb").GPU(4, 0).Index("0").Phase(corev1.PodSucceeded).Obj(),
		makePod("kube-system", "share-plugin-x7k2p").Node("cn-shanghai.i-uf61h64dz1tmlob9hmtb").Obj(),
	}
}

// heterogeneousScenario: gpu-a has a T4 (14) and an A100 (80): 4 on the T4 and 40 on the
// A100 → 44/94 (46%). gpu-b has no annotation: allocatable gpu-mem 16 / gpu-count 1 →
// one 16-unit card, 8 used by an old-style IDX pod; its GPU1 column reads 0/0.
// Cluster 52/110 (47%).
func heterogeneousScenario(t *testing.T) []runtime.Object {
	return []runtime.Object{
		makeNode("gpu-a", "10.0.0.1").Sharing().Inventory(t, gpushare.GiB, t4(0), a100(1)).Obj(),
		makeNode("gpu-b", "10.0.0.2").Allocatable(16, 1).Obj(),
		makePod("ml", "small").Node("gpu-a").GPU(4, 0).Alloc(`{"0":{"0":4}}`).Obj(),
		makePod("ml", "large").Node("gpu-a").GPU(40, 0).Alloc(`{"0":{"1":40}}`).Obj(),
		makePod("ml", "legacy").Node("gpu-b").GPU(8, 0).Index("0").Obj(),
	}
}

// cardChoiceScenario is heterogeneousScenario with card annotations: "small" avoids the
// A100 and spreads, "large" asks for an A100 by the HAMi name, "legacy" carries an invalid
// card-policy. The details view lists them under CARD CHOICE; the JSON is unchanged.
func cardChoiceScenario(t *testing.T) []runtime.Object {
	objs := heterogeneousScenario(t)
	ann := map[string]map[string]string{
		"small":  {gpushare.AnnotationCardPolicy: "spread", gpushare.AnnotationAvoidGPUType: "A100"},
		"large":  {gpushare.AnnotationHAMiUseGPUType: "A100"},
		"legacy": {gpushare.AnnotationCardPolicy: "tight"},
	}
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			for k, v := range ann[p.Name] {
				p.Annotations[k] = v
			}
		}
	}
	return objs
}

// multiScenario: two 16-unit cards. "trainer" wants 16 on 2 cards → 8 + 8. "bundle" has
// two app containers on card 0 (2 + 3 = 5) and an init container of 6 on card 0, which runs
// alone before them → card 0 holds max(5, 6) = 6. "solo" has 1 on card 1.
// Card 0: 8+6 = 14/16, card 1: 8+1 = 9/16, node 23/32 (71%).
func multiScenario(t *testing.T) []runtime.Object {
	return []runtime.Object{
		makeNode("gpu-m", "10.0.0.3").Sharing().Inventory(t, gpushare.GiB, card(0, 16, true), card(1, 16, true)).Obj(),
		makePod("ml", "trainer").Node("gpu-m").GPU(16, 2).Alloc(`{"0":{"0":8,"1":8}}`).Obj(),
		makePod("ml", "bundle").Node("gpu-m").InitGPU(6).GPU(2, 0).GPU(3, 0).
			Alloc(`{"0":{"0":2},"1":{"0":3}}`).InitAlloc(`{"0":{"0":6}}`).Obj(),
		makePod("ml", "solo").Node("gpu-m").GPU(1, 0).Alloc(`{"0":{"1":1}}`).Obj(),
	}
}

// unhealthyPendingScenario: card 1 went unhealthy while a pod of 4 still holds it →
// "4/16(unhealthy)". "waiting" is bound without any card annotation (the device plugin
// or extender has not written it yet) → PENDING 6. Node: 2 + 4 + 6 = 12/32 (37%).
func unhealthyPendingScenario(t *testing.T) []runtime.Object {
	return []runtime.Object{
		makeNode("gpu-u", "10.0.0.4").Sharing().Inventory(t, gpushare.GiB, card(0, 16, true), card(1, 16, false)).Obj(),
		makePod("default", "ok").Node("gpu-u").GPU(2, 0).Alloc(`{"0":{"0":2}}`).Obj(),
		makePod("default", "stuck").Node("gpu-u").GPU(4, 0).Alloc(`{"0":{"1":4}}`).Obj(),
		makePod("default", "waiting").Node("gpu-u").GPU(6, 0).Phase(corev1.PodPending).Obj(),
	}
}

// mibScenario: share-plugin runs with --memory-unit=MiB: a T4 is 15079 units; one pod of
// 4096 → 4096/15079 (27%), header GPU Memory(MiB).
func mibScenario(t *testing.T) []runtime.Object {
	d := t4(0)
	d.Units = 15079
	return []runtime.Object{
		makeNode("gpu-mib", "10.0.0.5").Sharing().Inventory(t, gpushare.Unit{MiB: 1}, d).Obj(),
		makePod("default", "mib-pod").Node("gpu-mib").GPU(4096, 0).Alloc(`{"0":{"0":4096}}`).Obj(),
	}
}

// mixedScenario: a GiB node (4/14) next to the MiB node (4096/15079). Totals in MiB:
// allocated 4*1024 + 4096 = 8192, total 14*1024 + 15079 = 29415 → 27%.
func mixedScenario(t *testing.T) []runtime.Object {
	return append(mibScenario(t),
		makeNode("gpu-gib", "10.0.0.6").Sharing().Inventory(t, gpushare.GiB, t4(0)).Obj(),
		makePod("default", "gib-pod").Node("gpu-gib").GPU(4, 0).Alloc(`{"0":{"0":4}}`).Obj(),
	)
}

// pendingScenario: "big" wants 10 on one card and has two FailedScheduling events, the
// newer (series form) wins; "fresh" has no event yet but a PodScheduled=False condition;
// "cpu" requests no gpu-mem and "bound" is already on a node: neither is listed.
// "pair" wants 8 on 2 cards in another namespace with a plain event.
func pendingScenario(t *testing.T) []runtime.Object {
	big := makePod("ml", "big").GPU(10, 0).Phase(corev1.PodPending).Obj()
	pair := makePod("team-b", "pair").GPU(8, 2).Phase(corev1.PodPending).Obj()
	return append(referenceScenario(t),
		big, pair,
		makePod("ml", "fresh").GPU(2, 0).Phase(corev1.PodPending).Condition(corev1.PodCondition{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
			Message: "0/2 nodes are available: 1 gpu-mem: need 2 on one card; largest free 1."}).Obj(),
		makePod("ml", "cpu").Phase(corev1.PodPending).Obj(),
		failedScheduling(big, "big.1", 1, "0/2 nodes are available: 1 Insufficient aliyun.com/gpu-mem.", false),
		failedScheduling(big, "big.2", 5, "0/2 nodes are available: 1 gpu-mem: need 10 on one card; largest free 2, 1 node(s) didn't match Pod's node affinity/selector.", true),
		failedScheduling(pair, "pair.1", 3, "0/2 nodes are available: 1 gpu-mem: need 4 on each of 2 cards; 1 card has 4 free.", false),
	)
}

// preflightScenario: one T4 node per value of share-plugin's gpushare.io/env-device-requests
// label (accepted, refused, unknown), one without it (no line) and one with a value this
// reader does not know (invalid, a warning); each runs one pod of 2 units.
func preflightScenario(t *testing.T) []runtime.Object {
	var out []runtime.Object
	for i, v := range []string{"accepted", "refused", "unknown", "", "maybe"} {
		name := fmt.Sprintf("gpu-%c", 'a'+i)
		n := makeNode(name, fmt.Sprintf("10.0.0.%d", 10+i)).Sharing().Inventory(t, gpushare.GiB, t4(0))
		if v != "" {
			n = n.Label(gpushare.LabelEnvDeviceRequests, v)
		}
		out = append(out, n.Obj(), makePod("ml", "nb-"+name).Node(name).GPU(2, 0).Alloc(`{"0":{"0":2}}`).Obj())
	}
	return out
}

// usageScenario: gpu-w (two T4s, label isolation=mps) publishes usage sampled at
// 2026-11-24T06:00:00Z. "nb" holds 4 on card 0 and its containers use 5000 + 324 = 5324 MiB
// (5.2GiB) there; "stray" holds 2 on card 0 (uses 1.5GiB) and uses 10 MiB on card 1, where it
// holds nothing; "ok" holds 4 on card 1 and NVML could not measure one of its processes
// (>=1000MiB); "fresh" (1 on card 1) started after the sample, and the usage of an earlier pod
// of its name (another UID) is not charged to it: no usage shown. Processes of no sharing
// pod use 300 MiB on card 0. Allocation: card 0 6/14, card 1 5/14 → 11/28 (39%). gpu-x has an
// unknown isolation label and a usage annotation of an unknown version: both warnings, no
// usage shown, isolation "invalid".
func usageScenario(t *testing.T) []runtime.Object {
	at := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)
	ctrs := func(c ...gpushare.ContainerUsage) []gpushare.ContainerUsage { return c }
	u := gpushare.Usage{Version: gpushare.UsageVersion, Time: at, Cards: []gpushare.CardUsage{
		{Index: 0, UUID: "GPU-t4-a", UnattributedMiB: 300, Pods: []gpushare.PodUsage{
			{Namespace: "ml", Name: "nb", UID: "ml-nb", Containers: ctrs(gpushare.ContainerUsage{Name: "c0", UsedMiB: 5000}, gpushare.ContainerUsage{Name: "c1", UsedMiB: 324})},
			{Namespace: "ml", Name: "stray", UID: "ml-stray", Containers: ctrs(gpushare.ContainerUsage{Name: "c0", UsedMiB: 1536})},
			// A pod of the same name, re-created since (another UID): not charged.
			{Namespace: "ml", Name: "fresh", UID: "ml-fresh-old", Containers: ctrs(gpushare.ContainerUsage{Name: "c0", UsedMiB: 9999})},
		}},
		{Index: 1, UUID: "GPU-t4-b", Pods: []gpushare.PodUsage{
			{Namespace: "ml", Name: "ok", UID: "ml-ok", Containers: ctrs(gpushare.ContainerUsage{Name: "c0", UsedMiB: 1000, Unknown: true})},
			{Namespace: "ml", Name: "stray", UID: "ml-stray", Containers: ctrs(gpushare.ContainerUsage{Name: "c0", UsedMiB: 10})},
		}},
	}}
	return []runtime.Object{
		makeNode("gpu-w", "10.0.0.7").Sharing().Inventory(t, gpushare.GiB, t4(0), t4(1)).
			Label(gpushare.LabelIsolation, string(gpushare.IsolationMPS)).Usage(t, u).Obj(),
		makeNode("gpu-x", "10.0.0.8").Sharing().Inventory(t, gpushare.GiB, t4(0)).
			Label(gpushare.LabelIsolation, "gvisor").Annotate(gpushare.AnnotationNodeUsage, `{"version":9,"cards":[]}`).Obj(),
		makePod("ml", "nb").Node("gpu-w").GPU(2, 0).GPU(2, 0).Alloc(`{"0":{"0":2},"1":{"0":2}}`).Obj(),
		makePod("ml", "stray").Node("gpu-w").GPU(2, 0).Alloc(`{"0":{"0":2}}`).Obj(),
		makePod("ml", "ok").Node("gpu-w").GPU(4, 0).Alloc(`{"0":{"1":4}}`).Obj(),
		makePod("ml", "fresh").Node("gpu-w").GPU(1, 0).Alloc(`{"0":{"1":1}}`).Obj(),
		makePod("ml", "other").Node("gpu-x").GPU(1, 0).Alloc(`{"0":{"0":1}}`).Obj(),
	}
}

// limitScenario: multiScenario's pods, where "trainer"'s container may burst to 24 (12 per
// card), "bundle"'s first app container to 6 and its init container to 10, and a pod with an
// unreadable limit annotation ("broken", 1 unit on card 1: a warning, no limit shown). Card 0:
// trainer 12 + bundle max(6+3, 10) = 10 → limits 22/16; card 1: trainer 12 + solo 1 + broken 1
// → 14/16.
func limitScenario(t *testing.T) []runtime.Object {
	objs := multiScenario(t)
	ann := map[string]string{"trainer": "c0=24", "bundle": "c0=6,init0=10"}
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && ann[p.Name] != "" {
			p.Annotations[gpushare.AnnotationMemLimit] = ann[p.Name]
		}
	}
	broken := makePod("ml", "broken").Node("gpu-m").GPU(1, 0).Alloc(`{"0":{"1":1}}`).Obj()
	broken.Annotations[gpushare.AnnotationMemLimit] = "c0=0"
	return append(objs, broken)
}

// computeScenario: an MPS node whose card 0 holds two pods with compute shares ("a" 25 %,
// "b" 50 %: Compute GPU0 75%) and whose card 1 holds a memory-only pod and one whose share
// annotation does not read ("broken": a warning, no share shown).
func computeScenario(t *testing.T) []runtime.Object {
	return []runtime.Object{
		makeNode("gpu-s", "10.0.0.5").Sharing().Label(gpushare.LabelIsolation, "mps").
			Inventory(t, gpushare.GiB, card(0, 16, true), card(1, 16, true)).Obj(),
		makePod("ml", "a").Node("gpu-s").GPU(4, 0).Alloc(`{"0":{"0":4}}`).Annotate(gpushare.AnnotationComputeShare, "c0=25").Obj(),
		makePod("ml", "b").Node("gpu-s").GPU(4, 0).Alloc(`{"0":{"0":4}}`).Annotate(gpushare.AnnotationComputeShare, "c0=50").Obj(),
		makePod("ml", "m").Node("gpu-s").GPU(4, 0).Alloc(`{"0":{"1":4}}`).Obj(),
		makePod("ml", "broken").Node("gpu-s").GPU(2, 0).Alloc(`{"0":{"1":2}}`).Annotate(gpushare.AnnotationComputeShare, "c0=7").Obj(),
	}
}
