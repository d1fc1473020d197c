package inspect

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TestPreparedProblems: --check's comparison of a DRA node's allocated claims with the
// claims its plugin prepared, matched by UID.
func TestPreparedProblems(t *testing.T) {
	card := []draCard{{Device: "gpu-0", Index: 0, Total: 14, Healthy: true}, {Device: "gpu-1", Index: 1, Total: 14, Healthy: true}}
	nb := func(name string, cards gpushare.CardUnits) draClaim {
		return draClaim{Namespace: "ml", Name: name + "-gpu", UID: "uid-" + name, Pods: []string{name}, Cards: cards}
	}
	held := func(name string, cards gpushare.CardUnits) gpushare.DRAPreparedClaim {
		return gpushare.DRAPreparedClaim{UID: types.UID("uid-" + name), Namespace: "ml", Name: name + "-gpu", Cards: cards}
	}
	tests := []struct {
		name     string
		claims   []draClaim
		prepared []gpushare.DRAPreparedClaim
		noReport bool            // the plugin was not read
		running  map[string]bool // "namespace/pod"
		want     []string
	}{{
		name:     "prepared as allocated",
		claims:   []draClaim{nb("a", gpushare.CardUnits{0: 4}), nb("b", gpushare.CardUnits{0: 2, 1: 2})},
		prepared: []gpushare.DRAPreparedClaim{held("a", gpushare.CardUnits{0: 4}), held("b", gpushare.CardUnits{0: 2, 1: 2})},
		running:  map[string]bool{"ml/a": true, "ml/b": true},
	}, {
		name:    "allocated, its pod runs, not prepared",
		claims:  []draClaim{nb("a", gpushare.CardUnits{0: 4})},
		running: map[string]bool{"ml/a": true},
		want:    []string{"claim-not-prepared ml/a: node n: claim ml/a-gpu is allocated here and its pod a runs, but the DRA plugin has not prepared it"},
	}, {
		name:   "allocated, its pod not running yet: not prepared is no problem",
		claims: []draClaim{nb("a", gpushare.CardUnits{0: 4})},
	}, {
		name:     "prepared, no longer allocated",
		prepared: []gpushare.DRAPreparedClaim{held("gone", gpushare.CardUnits{1: 3})},
		want:     []string{"claim-prepared-not-allocated : node n: the DRA plugin holds claim ml/gone-gpu (uid uid-gone) prepared with {1:3}, but no claim of that UID is allocated on the node"},
	}, {
		name:     "same name, other UID: the old claim is stale, the new one not prepared",
		claims:   []draClaim{nb("a", gpushare.CardUnits{0: 4})},
		prepared: []gpushare.DRAPreparedClaim{{UID: "uid-old", Namespace: "ml", Name: "a-gpu", Cards: gpushare.CardUnits{0: 4}}},
		running:  map[string]bool{"ml/a": true},
		want: []string{
			"claim-not-prepared ml/a: node n: claim ml/a-gpu is allocated here and its pod a runs, but the DRA plugin has not prepared it",
			"claim-prepared-not-allocated : node n: the DRA plugin holds claim ml/a-gpu (uid uid-old) prepared with {0:4}, but no claim of that UID is allocated on the node",
		},
	}, {
		name:     "units differ",
		claims:   []draClaim{nb("a", gpushare.CardUnits{0: 4}), nb("b", gpushare.CardUnits{0: 2, 1: 2})},
		prepared: []gpushare.DRAPreparedClaim{held("a", gpushare.CardUnits{0: 6}), held("b", gpushare.CardUnits{0: 2})},
		want: []string{
			"claim-prepared-differs : node n: claim ml/a-gpu: the DRA plugin prepared {0:6}, the claim's allocation {0:4}",
			"claim-prepared-differs : node n: claim ml/b-gpu: the DRA plugin prepared {0:2}, the claim's allocation {0:2,1:2}",
		},
	}, {
		name:     "plugin not read: nothing compared",
		claims:   []draClaim{nb("a", gpushare.CardUnits{0: 4})},
		running:  map[string]bool{"ml/a": true},
		noReport: true,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := checkViews{DRA: map[string]draNode{"n": {Cards: card, Claims: tc.claims}}, RunningPods: tc.running}
			if !tc.noReport {
				v.DRAPrepared = []gpushare.DRAPreparedReport{{Node: "n", Claims: tc.prepared}, {Node: "other", Claims: []gpushare.DRAPreparedClaim{held("x", gpushare.CardUnits{0: 1})}}}
			}
			r := compareViews(v)
			var got []string
			for _, p := range r.Problems {
				got = append(got, p.Kind+" "+p.Pod+": "+p.Line)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems (-want,+got):\n%s", diff)
			}
			if r.OK != (len(tc.want) == 0) {
				t.Errorf("OK = %v", r.OK)
			}
		})
	}
}
