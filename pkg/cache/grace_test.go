package cache_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/gpushare/gpushare/pkg/cache"
	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// TestUnrecordedPodGracePeriod: a self-placed pod without a record counts on every card of
// its node for the grace period, so nothing fits beside it; once the period has passed it
// counts its units against the node's free units as a whole (from the cards with the least
// free first), a pod that fits the node's total minus those units is placed on a card, and
// one Warning event on the pod and one on the node say what holds the node's units.
func TestUnrecordedPodGracePeriod(t *testing.T) {
	recorded := ct.Placed(ct.Pod("recorded", 20), "n1", gpushare.CardUnits{1: 20})
	tests := []struct {
		name        string
		node        *corev1.Node
		objs        []*corev1.Pod
		units       int64  // of the self-placed pod
		wantBefore  string // cards during the grace period
		wantAfter   string // cards once it has passed
		fits        int64  // a pod of this many units fits only after it
		wantCards   []int  // where Reserve puts that pod
		wantCharged string // the charge the event names
	}{{
		name:        "a whole card on a two-card node",
		node:        ct.Node("n1", 80, 80),
		units:       80,
		wantBefore:  "0:80/80 1:80/80",
		wantAfter:   "0:80/80 1:0/80",
		fits:        80,
		wantCards:   []int{1},
		wantCharged: "card0=80 units",
	}, {
		name:        "charged to the cards with the least free first",
		node:        ct.Node("n1", 80, 40),
		objs:        []*corev1.Pod{recorded},
		units:       30,
		wantBefore:  "0:30/80 1:50/40",
		wantAfter:   "0:10/80 1:40/40",
		fits:        70,
		wantCards:   []int{0},
		wantCharged: "card0=10 card1=20 units",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := record.NewFakeRecorder(100)
			rec.IncludeObject = true
			objs := []runtime.Object{tc.node, selfPlaced(ct.Pod("self", tc.units), "n1", nil)}
			for _, p := range tc.objs {
				objs = append(objs, p)
			}
			env := ct.StartWith(t, ct.Options{TTL: time.Hour, Recorder: rec}, objs...)
			pol := binpack(t)
			fit := ct.Pod("fit", tc.fits)
			if e := nextEvent(t, rec); !strings.Contains(e, cache.EventAllocationInvalid) {
				t.Fatalf("first event %q, want %s", e, cache.EventAllocationInvalid)
			}

			for _, step := range []time.Duration{0, cache.DefaultUnrecordedGrace - time.Second} {
				env.Clock.Step(step)
				env.Cache.EndGraceNow()
				if got := cards(env.Cache, "n1"); got != tc.wantBefore {
					t.Fatalf("cards %s into the grace period: %q, want %q", env.Clock.Since(ct.Epoch), got, tc.wantBefore)
				}
				if charged, since := inspectUnrecorded(env.Cache, "self"); charged || !since.Equal(ct.Epoch) {
					t.Fatalf("Inspect %s into the grace period: charged %v, unrecorded since %s; want not charged, since %s",
						env.Clock.Since(ct.Epoch), charged, since, ct.Epoch)
				}
				var fe *policy.FitError
				if err := env.Cache.Fits("n1", request(t, fit), pol); !errors.As(err, &fe) {
					t.Fatalf("Fits(%d) %s into the grace period = %v, want a FitError", tc.fits, env.Clock.Since(ct.Epoch), err)
				}
			}

			env.Clock.Step(time.Second)
			env.Cache.EndGraceNow()
			if got := cards(env.Cache, "n1"); got != tc.wantAfter {
				t.Fatalf("cards after the grace period: %q, want %q", got, tc.wantAfter)
			}
			if charged, since := inspectUnrecorded(env.Cache, "self"); !charged || !since.Equal(ct.Epoch) {
				t.Fatalf("Inspect after the grace period: charged %v, unrecorded since %s; want charged, since %s", charged, since, ct.Epoch)
			}
			want := "Warning " + cache.EventUnrecordedPod + " pod default/self requests " + strconv.FormatInt(tc.units, 10) +
				" units on node n1 without an allocation record for longer than 2m0s; it is counted against the node's free memory as a whole, no longer on every card: " +
				tc.wantCharged + " (the cards it uses are unknown: a pod placed beside it may over-commit one until its record appears or it ends)"
			for _, kind := range []string{"Pod", "Node"} {
				if got := nextEvent(t, rec); got != want+" involvedObject{kind="+kind+",apiVersion=v1}" {
					t.Errorf("event:\n got %q\nwant %q on %s", got, want, kind)
				}
			}
			if st := env.Cache.Anomalies(); st.Conservative != 1 {
				t.Errorf("Anomalies().Conservative = %d, want 1 (still counted for want of a record)", st.Conservative)
			}

			r, err := env.Cache.Reserve(t.Context(), "n1", fit, request(t, fit), pol)
			if err != nil {
				t.Fatalf("Reserve(%d units) after the grace period: %v", tc.fits, err)
			}
			if d := cmp.Diff(tc.wantCards, r.Placement.Allocation.Cards()); d != "" {
				t.Errorf("cards reserved (-want,+got):\n%s", d)
			}
			// The node's free total is spent: the charge still holds the pod's units.
			var fe *policy.FitError
			if err := env.Cache.Fits("n1", request(t, ct.Pod("one", 1)), pol); !errors.As(err, &fe) {
				t.Errorf("Fits(1) with the node's total spent = %v, want a FitError", err)
			}
			env.Clock.Step(time.Hour)
			env.Cache.EndGraceNow() // sent once: a later pass adds nothing
			noMoreEvents(t, env, rec)
		})
	}
}

// inspectUnrecorded is what Inspect tells of the pod name on node n1: whether it is charged
// (on every card listing it) and since when it has counted without a record.
func inspectUnrecorded(c *cache.Cache, name string) (charged bool, since time.Time) {
	n, _ := c.InspectNode("n1")
	for _, card := range n.Cards {
		for _, p := range card.Pods {
			if p.Name == name {
				charged = p.Charged
				if p.UnrecordedSince != nil {
					since = p.UnrecordedSince.Time
				}
			}
		}
	}
	return charged, since
}

// TestUnrecordedPodRecordAfterGrace: a record that appears after the grace period makes the
// pod count its card alone again.
func TestUnrecordedPodRecordAfterGrace(t *testing.T) {
	env, rec := startRecording(t, ct.Node("n1", 80, 80), selfPlaced(ct.Pod("self", 40), "n1", nil))
	nextEvent(t, rec)
	env.Clock.Step(cache.DefaultUnrecordedGrace)
	env.Cache.EndGraceNow()
	if got, want := cards(env.Cache, "n1"), "0:40/80 1:0/80"; got != want {
		t.Fatalf("cards after the grace period: %q, want %q", got, want)
	}
	nextEvent(t, rec) // the pod's
	nextEvent(t, rec) // the node's
	editPod(t, env, "self", func(p *corev1.Pod) {
		p.Annotations = ct.Placed(ct.Pod("self", 40), "n1", gpushare.CardUnits{1: 40}).Annotations
	})
	ct.Eventually(t, "the record counts", func() bool { return cards(env.Cache, "n1") == "0:0/80 1:40/80" })
	if st := env.Cache.Anomalies(); st.Conservative != 0 {
		t.Errorf("Anomalies().Conservative = %d, want 0", st.Conservative)
	}
}
