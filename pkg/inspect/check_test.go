package inspect

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// checkNode is gpu-a with two T4 cards of 14 units.
func checkNode(t *testing.T) corev1.Node {
	return *makeNode("gpu-a", "10.0.0.1").Sharing().Inventory(t, gpushare.GiB, t4(0), t4(1)).Obj()
}

// agreeingPods: ml/a 4 units on card 0, ml/b 6 on card 1.
func agreeingPods() []corev1.Pod {
	return []corev1.Pod{
		*makePod("ml", "a").Node("gpu-a").GPU(4, 0).Alloc(`{"0":{"0":4}}`).Obj(),
		*makePod("ml", "b").Node("gpu-a").GPU(6, 0).Alloc(`{"0":{"1":6}}`).Obj(),
	}
}

// agreeingExtender is the extender's ledger of agreeingPods.
func agreeingExtender() *gpushare.InspectReport {
	return &gpushare.InspectReport{Nodes: []gpushare.InspectNode{{Name: "gpu-a", Total: 28, Used: 10, Cards: []gpushare.InspectCard{
		{Index: 0, Total: 14, Used: 4, Healthy: true, Pods: []gpushare.InspectPod{{Namespace: "ml", Name: "a", UID: "ml-a", Units: 4}}},
		{Index: 1, Total: 14, Used: 6, Healthy: true, Pods: []gpushare.InspectPod{{Namespace: "ml", Name: "b", UID: "ml-b", Units: 6}}},
	}}}}
}

// agreeingPlugin is share-plugin's answer for agreeingPods.
func agreeingPlugin() gpushare.ServedReport {
	return gpushare.ServedReport{Node: "gpu-a",
		Cards: []gpushare.ServedCard{{Index: 0, UUID: "GPU-t4-a", TotalUnits: 14, ServedUnits: 4}, {Index: 1, UUID: "GPU-t4-b", TotalUnits: 14, ServedUnits: 6}},
		Containers: []gpushare.ServedContainer{
			{Namespace: "ml", Name: "a", UID: "ml-a", Container: "app/0", Cards: gpushare.CardUnits{0: 4}},
			{Namespace: "ml", Name: "b", UID: "ml-b", Container: "app/0", Cards: gpushare.CardUnits{1: 6}},
		}}
}

func TestCompareViews(t *testing.T) {
	tests := []struct {
		name      string
		pods      []corev1.Pod
		extender  func(*gpushare.InspectReport) // changes agreeingExtender; nil keeps it
		noExt     bool                          // the extender was not read
		plugin    func(*gpushare.ServedReport)  // changes agreeingPlugin
		skipped   []notChecked                  // components not read
		want      []string                      // problem lines
		wantKinds []string                      // their kinds
		wantNotes []string                      // notes
		wantOK    bool                          // no problem, every required view read
		wantPods  int                           // pods counted
	}{
		{
			name: "all three agree", pods: agreeingPods(), wantOK: true, wantPods: 2,
		},
		{
			name:      "annotations overcommit a card: 10+8 = 18 > 14",
			pods:      append(agreeingPods()[:1], *makePod("ml", "big").Node("gpu-a").GPU(10, 0).Alloc(`{"0":{"0":10}}`).Obj(), *makePod("ml", "c").Node("gpu-a").GPU(4, 0).Alloc(`{"0":{"0":4}}`).Obj()),
			noExt:     true,
			plugin:    func(r *gpushare.ServedReport) { r.Containers = nil },
			wantPods:  3,
			want:      []string{"node gpu-a card 0: annotations give 18 units, card size 14 (ml/a 4, ml/big 10, ml/c 4)"},
			wantKinds: []string{problemCardOvercommitted},
		},
		{
			name:      "bound gpu-mem pod without allocation",
			pods:      append(agreeingPods(), *makePod("ml", "x").Node("gpu-a").GPU(4, 0).Obj()),
			wantPods:  3,
			want:      []string{"node gpu-a: pod ml/x: requests 4 units but has no allocation annotation"},
			wantKinds: []string{problemInvalidRecord},
		},
		{
			name:      "container holds less than it requests: 2 of 4",
			pods:      append(agreeingPods(), *makePod("ml", "x").Node("gpu-a").GPU(4, 0).Alloc(`{"0":{"0":2}}`).Obj()),
			wantPods:  3,
			want:      []string{`node gpu-a: pod ml/x: allocation invalid: container "c0" (app/0): allocation holds 2 units on card 0, the request wants 4 per card`},
			wantKinds: []string{problemInvalidRecord},
		},
		{
			name:      "multi-card container on one card only: 8 on 2 cards wants 4+4",
			pods:      append(agreeingPods(), *makePod("ml", "x").Node("gpu-a").GPU(8, 2).Alloc(`{"0":{"0":8}}`).Obj()),
			wantPods:  3,
			want:      []string{`node gpu-a: pod ml/x: allocation invalid: container "c0" (app/0): allocation lists 1 cards, the request wants 2`},
			wantKinds: []string{problemInvalidRecord},
		},
		{
			name:      "card the inventory does not list",
			pods:      append(agreeingPods(), *makePod("ml", "x").Node("gpu-a").GPU(4, 0).Alloc(`{"0":{"3":4}}`).Obj()),
			wantPods:  3,
			want:      []string{`node gpu-a: pod ml/x: allocation invalid: container "c0" (app/0): allocation names card 3, which the node does not have`},
			wantKinds: []string{problemInvalidRecord},
		},
		{
			name:      "allocation for a container that requests nothing",
			pods:      append(agreeingPods(), *makePod("ml", "x").Node("gpu-a").GPU(4, 0).Alloc(`{"0":{"0":4},"1":{"1":2}}`).Obj()),
			wantPods:  3,
			want:      []string{`node gpu-a: pod ml/x: allocation invalid: allocation names container app/1, which does not exist or requests no gpu-mem`},
			wantKinds: []string{problemInvalidRecord},
		},
		{
			name:      "empty entry for a gpu-mem container",
			pods:      append(agreeingPods(), *makePod("ml", "x").Node("gpu-a").GPU(4, 0).Alloc(`{"0":{}}`).Obj()),
			wantPods:  3,
			want:      []string{`node gpu-a: pod ml/x: allocation invalid: container "c0" (app/0): no cards in the allocation; it requests 4 units`},
			wantKinds: []string{problemInvalidRecord},
		},
		{
			name: "empty entry for a container without gpu-mem names nothing: ml/x counts 4 on card 0",
			pods: append(agreeingPods(), *makePod("ml", "x").Node("gpu-a").GPU(4, 0).GPU(0, 0).Alloc(`{"0":{"0":4},"1":{}}`).Obj()),
			extender: func(e *gpushare.InspectReport) {
				e.Nodes[0].Used += 4
				c := &e.Nodes[0].Cards[0]
				c.Used += 4
				c.Pods = append(c.Pods, gpushare.InspectPod{Namespace: "ml", Name: "x", UID: "ml-x", Units: 4})
			},
			plugin: func(r *gpushare.ServedReport) {
				r.Cards[0].ServedUnits += 4
				r.Containers = append(r.Containers, gpushare.ServedContainer{Namespace: "ml", Name: "x", UID: "ml-x", Container: "app/0", Cards: gpushare.CardUnits{0: 4}})
			},
			wantPods: 3,
			wantOK:   true,
		},
		{
			name:      "allocation that does not parse",
			pods:      append(agreeingPods(), *makePod("ml", "x").Node("gpu-a").GPU(4, 0).Alloc(`[1]`).Obj()),
			wantPods:  3,
			want:      []string{`node gpu-a: pod ml/x: allocation invalid: decoding allocation "[1]": json: cannot unmarshal array into Go value of type gpushare.Allocation`},
			wantKinds: []string{problemInvalidRecord},
		},
		{
			name: "extender misses a pod: card 0 counts 4, annotations 4+4",
			pods: append(agreeingPods(), *makePod("ml", "c").Node("gpu-a").GPU(4, 0).Alloc(`{"0":{"0":4}}`).Obj()),
			plugin: func(r *gpushare.ServedReport) {
				r.Containers = append(r.Containers, gpushare.ServedContainer{Namespace: "ml", Name: "c", UID: "ml-c", Container: "app/0", Cards: gpushare.CardUnits{0: 4}})
			},
			wantPods:  3,
			want:      []string{"node gpu-a card 0: extender counts 4 units, annotations 8 (ml/c: extender 0, annotations 4)"},
			wantKinds: []string{problemExtenderDiffers},
		},
		{
			name: "extender's used drifts from its pods: 5 with pods of 4",
			pods: agreeingPods(),
			extender: func(e *gpushare.InspectReport) {
				e.Nodes[0].Cards[0].Used = 5
			},
			wantPods:  2,
			want:      []string{"node gpu-a card 0: extender counts 5 units, annotations 4 (its pods agree; its used total does not)"},
			wantKinds: []string{problemExtenderDiffers},
		},
		{
			name: "extender holds a deleted pod of the same name (other uid)",
			pods: agreeingPods(),
			extender: func(e *gpushare.InspectReport) {
				e.Nodes[0].Cards[0].Pods[0].UID = "old"
			},
			wantPods:  2,
			want:      []string{"node gpu-a card 0: extender counts 4 units, annotations 4 (ml/a: extender 0, annotations 4; ml/a (uid old): extender 4, annotations not bound here)"},
			wantKinds: []string{problemExtenderDiffers},
		},
		{
			name: "reservation not yet bound: noted, no disagreement (used 4+2, annotations 4)",
			pods: agreeingPods(),
			extender: func(e *gpushare.InspectReport) {
				c := &e.Nodes[0].Cards[0]
				c.Used += 2
				c.Pods = append(c.Pods, gpushare.InspectPod{Namespace: "ml", Name: "r", UID: "ml-r", Units: 2, Reserved: true})
			},
			wantPods:  2,
			wantNotes: []string{"node gpu-a card 0: extender holds 2 units for ml/r, reserved and not yet seen bound"},
			wantOK:    true,
		},
		{
			name: "reserved pod already bound in the API: left out on both sides",
			pods: append(agreeingPods(), *makePod("ml", "r").Node("gpu-a").GPU(2, 0).Alloc(`{"0":{"0":2}}`).Obj()),
			extender: func(e *gpushare.InspectReport) {
				c := &e.Nodes[0].Cards[0]
				c.Used += 2
				c.Pods = append(c.Pods, gpushare.InspectPod{Namespace: "ml", Name: "r", UID: "ml-r", Units: 2, Reserved: true})
			},
			wantPods:  3,
			wantNotes: []string{"node gpu-a card 0: extender holds 2 units for ml/r, reserved and not yet seen bound"},
			wantOK:    true,
		},
		{
			name: "invalid record counted conservatively by the extender on both cards",
			pods: append(agreeingPods(), *makePod("ml", "x").Node("gpu-a").GPU(4, 0).Alloc(`[1]`).Obj()),
			extender: func(e *gpushare.InspectReport) {
				for i := range e.Nodes[0].Cards {
					c := &e.Nodes[0].Cards[i]
					c.Used += 4
					c.Pods = append(c.Pods, gpushare.InspectPod{Namespace: "ml", Name: "x", UID: "ml-x", Units: 4, Conservative: true})
				}
			},
			wantPods: 3,
			want: []string{
				`node gpu-a: pod ml/x: allocation invalid: decoding allocation "[1]": json: cannot unmarshal array into Go value of type gpushare.Allocation`,
				"node gpu-a: pod ml/x: extender counts it on every card (0,1) because its record is invalid",
			},
			wantKinds: []string{problemInvalidRecord, problemExtenderConservative},
		},
		{
			name: "self-placed pod past its grace period charged by the extender to two cards",
			pods: append(agreeingPods(), *makePod("ml", "x").Node("gpu-a").GPU(6, 0).Obj()),
			extender: func(e *gpushare.InspectReport) {
				since := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
				for i, u := range []int64{4, 2} {
					c := &e.Nodes[0].Cards[i]
					c.Used += u
					c.Pods = append(c.Pods, gpushare.InspectPod{Namespace: "ml", Name: "x", UID: "ml-x", Units: u,
						Conservative: true, Charged: true, UnrecordedSince: &since})
				}
			},
			wantPods: 3,
			want: []string{
				"node gpu-a: pod ml/x: requests 6 units but has no allocation annotation",
				"node gpu-a: pod ml/x: blocks 6 units of the node on cards 0 (4 units), 1 (2 units): no valid allocation record " +
					"since 2026-01-02T03:04:05Z, past the grace period, so the extender charges it to the node's free units " +
					"until share-plugin records its card or it ends",
			},
			wantKinds: []string{problemInvalidRecord, problemExtenderConservative},
		},
		{
			name: "extender trusts a record the annotations find invalid",
			pods: append(agreeingPods(), *makePod("ml", "x").Node("gpu-a").GPU(4, 0).Alloc(`{"0":{"0":2}}`).Obj()),
			extender: func(e *gpushare.InspectReport) {
				c := &e.Nodes[0].Cards[0]
				c.Used += 2
				c.Pods = append(c.Pods, gpushare.InspectPod{Namespace: "ml", Name: "x", UID: "ml-x", Units: 2})
			},
			plugin:   func(r *gpushare.ServedReport) {},
			wantPods: 3,
			want: []string{
				`node gpu-a: pod ml/x: allocation invalid: container "c0" (app/0): allocation holds 2 units on card 0, the request wants 4 per card`,
				"node gpu-a card 0: extender counts 6 units, annotations 4 (ml/x: extender 2, annotations invalid)",
			},
			wantKinds: []string{problemInvalidRecord, problemExtenderDiffers},
		},
		{
			name: "extender knows a node the annotations do not share",
			pods: agreeingPods(),
			extender: func(e *gpushare.InspectReport) {
				e.Nodes = append(e.Nodes, gpushare.InspectNode{Name: "gpu-z", Cards: []gpushare.InspectCard{{Index: 0, Total: 16, Used: 3, Pods: []gpushare.InspectPod{{Namespace: "ml", Name: "ghost", Units: 3}}}}})
			},
			wantPods:  2,
			want:      []string{"node gpu-z card 0: extender counts 3 units, annotations 0 (ml/ghost: extender 3, annotations not bound here)"},
			wantKinds: []string{problemExtenderDiffers},
		},
		{
			name: "share-plugin served another card than annotated",
			pods: agreeingPods(),
			plugin: func(r *gpushare.ServedReport) {
				r.Containers[0].Cards = gpushare.CardUnits{1: 4}
			},
			wantPods:  2,
			want:      []string{"node gpu-a: pod ml/a app/0: share-plugin served {1:4}, annotations {0:4}"},
			wantKinds: []string{problemPluginDiffers},
		},
		{
			name: "share-plugin served a pod not bound to the node",
			pods: agreeingPods(),
			plugin: func(r *gpushare.ServedReport) {
				r.Containers = append(r.Containers, gpushare.ServedContainer{Namespace: "ml", Name: "gone", UID: "ml-gone", Container: "init/0", Cards: gpushare.CardUnits{0: 2}})
			},
			wantPods:  2,
			want:      []string{"node gpu-a: pod ml/gone init/0: share-plugin served {0:2}, annotations pod not bound here"},
			wantKinds: []string{problemPluginDiffers},
		},
		{
			name: "share-plugin served a pod of the same name but another uid",
			pods: agreeingPods(),
			plugin: func(r *gpushare.ServedReport) {
				r.Containers[1].UID = "old"
			},
			wantPods:  2,
			want:      []string{"node gpu-a: pod ml/b app/0: share-plugin served {1:6}, annotations pod not bound here"},
			wantKinds: []string{problemPluginDiffers},
		},
		{
			name: "share-plugin served more than the card: 15 > 14",
			pods: agreeingPods(),
			plugin: func(r *gpushare.ServedReport) {
				r.Cards[1].ServedUnits = 15
			},
			wantPods:  2,
			want:      []string{"node gpu-a card 1: share-plugin served 15 units, card size 14"},
			wantKinds: []string{problemPluginOvercommitted},
		},
		{
			name: "share-plugin names a container that is no ref",
			pods: agreeingPods(),
			plugin: func(r *gpushare.ServedReport) {
				r.Containers[0].Container = "main"
			},
			wantPods:  2,
			want:      []string{`node gpu-a: pod ml/a: share-plugin served container "main", which is not app/N or init/N`},
			wantKinds: []string{problemPluginInvalid},
		},
		{
			name:     "required component not read: no problem, not ok",
			pods:     agreeingPods(),
			noExt:    true,
			skipped:  []notChecked{{Component: "extender", Reason: "connection refused", Required: true}},
			wantPods: 2,
		},
		{
			name:     "optional component not read: ok",
			pods:     agreeingPods(),
			noExt:    true,
			skipped:  []notChecked{{Component: "extender", Reason: "connection refused"}},
			wantPods: 2,
			wantOK:   true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := checkViews{
				Annotations: buildAnnotatedView([]corev1.Node{checkNode(t)}, tc.pods, gpushare.DefaultResources()),
				NotChecked:  tc.skipped,
			}
			if !tc.noExt {
				v.Extender = agreeingExtender()
				if tc.extender != nil {
					tc.extender(v.Extender)
				}
			}
			p := agreeingPlugin()
			if tc.plugin != nil {
				tc.plugin(&p)
			}
			v.Plugins = []gpushare.ServedReport{p}
			r := compareViews(v)
			var lines, kinds []string
			for _, pr := range r.Problems {
				lines = append(lines, pr.Line)
				kinds = append(kinds, pr.Kind)
			}
			if diff := cmp.Diff(tc.want, lines); diff != "" {
				t.Errorf("problems (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantKinds, kinds); diff != "" {
				t.Errorf("kinds (-want,+got):\n%s", diff)
			}
			notes := tc.wantNotes
			if notes == nil {
				notes = []string{}
			}
			if diff := cmp.Diff(notes, r.Notes); diff != "" {
				t.Errorf("notes (-want,+got):\n%s", diff)
			}
			if r.OK != tc.wantOK {
				t.Errorf("OK = %v, want %v", r.OK, tc.wantOK)
			}
			if r.Nodes != 1 || r.Cards != 2 || r.Pods != tc.wantPods {
				t.Errorf("counted %d nodes, %d cards, %d pods; want 1, 2, %d", r.Nodes, r.Cards, r.Pods, tc.wantPods)
			}
		})
	}
}
