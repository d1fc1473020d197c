package cache_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpushare/gpushare/pkg/cache"
	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

var res = gpushare.DefaultResources()

// cards summarises a node as "idx:used/total" per card ("!" marks unhealthy), "" when the
// cache has no such node.
func cards(c *cache.Cache, node string) string {
	n, ok := c.InspectNode(node)
	if !ok {
		return ""
	}
	var parts []string
	for _, card := range n.Cards {
		s := fmt.Sprintf("%d:%d/%d", card.Index, card.Used, card.Total)
		if !card.Healthy {
			s += "!"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func binpack(t *testing.T) policy.Policy {
	t.Helper()
	p, err := policy.New("binpack")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func request(t *testing.T, pod *corev1.Pod) gpushare.PodRequest {
	t.Helper()
	r, err := res.PodRequest(pod)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRebuildFromAnnotationsBeforeReady(t *testing.T) {
	oldStyle := ct.Pod("old", 4) // only the single-card annotations of the old extender
	oldStyle.Spec.NodeName = "n1"
	oldStyle.Status.Phase = corev1.PodRunning
	oldStyle.Annotations = map[string]string{gpushare.AnnotationIndex: "1", gpushare.AnnotationPodUnits: "4"}

	multi := ct.Pod("multi", 8)
	ct.SetGPU(&multi.Spec.Containers[0], 8, 2)
	ct.Placed(multi, "n2", gpushare.CardUnits{0: 4, 1: 4})

	succeeded := ct.Placed(ct.Pod("done", 16), "n1", gpushare.CardUnits{0: 16})
	succeeded.Status.Phase = corev1.PodSucceeded

	badAnn := ct.Placed(ct.Pod("bad", 2), "n1", gpushare.CardUnits{0: 2})
	badAnn.Annotations[gpushare.AnnotationAllocation] = "{not json"

	unbound := ct.Pod("pending", 3) // annotated but never bound: not counted
	unbound.Annotations = map[string]string{gpushare.AnnotationAllocation: `{"0":{"0":3}}`}

	objs := []runtime.Object{
		ct.Node("n1", 16, 16), ct.Node("n2", 8, 8), ct.AllocatableNode("old-plugin", 32, 2),
		ct.Placed(ct.Pod("a", 6), "n1", gpushare.CardUnits{0: 6}),
		ct.Placed(ct.Pod("b", 5), "n1", gpushare.CardUnits{0: 5}),
		oldStyle, multi, succeeded, badAnn, unbound,
		ct.Placed(ct.Pod("c", 10), "old-plugin", gpushare.CardUnits{1: 10}),
		ct.Placed(ct.Pod("ghost", 2), "not-a-node", gpushare.CardUnits{0: 2}),
		ct.Pod("cpu-only", 0),
	}
	env := ct.Start(t, time.Minute, objs...)
	// No waiting: Start returned once Ready, so the rebuild must be complete.
	want := map[string]string{
		// a 6 + b 5 on card 0, oldStyle 4 on card 1, and "bad" (2 units, unreadable record)
		// counted on both cards until a valid record appears, for 2m0s at most: 13 and 6
		"n1":         "0:13/16 1:6/16",
		"n2":         "0:4/8 1:4/8",
		"old-plugin": "0:0/16 1:10/16",
		"not-a-node": "0:2/0!", // pods on a node the cache does not know still count
	}
	got := map[string]string{}
	for _, n := range env.Cache.Inspect() {
		got[n.Name] = cards(env.Cache, n.Name)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("cards after rebuild (-want,+got):\n%s", d)
	}
	if err := env.Cache.Fits("not-a-node", request(t, ct.Pod("x", 1)), binpack(t)); !errors.Is(err, cache.ErrUnknownNode) {
		t.Errorf("Fits on a node known only from pods: got %v, want ErrUnknownNode", err)
	}
}

func TestPodsLeave(t *testing.T) {
	tests := []struct {
		name   string
		change func(ctx context.Context, env *ct.Env, pod *corev1.Pod) error
	}{
		{"deleted", func(ctx context.Context, env *ct.Env, pod *corev1.Pod) error {
			return env.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
		}},
		{"succeeded", phase(corev1.PodSucceeded)},
		{"failed", phase(corev1.PodFailed)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := ct.Placed(ct.Pod("p", 6), "n1", gpushare.CardUnits{1: 6})
			env := ct.Start(t, time.Minute, ct.Node("n1", 16, 16), pod)
			if got, want := cards(env.Cache, "n1"), "0:0/16 1:6/16"; got != want {
				t.Fatalf("before: cards %q, want %q", got, want)
			}
			if err := tc.change(context.Background(), env, pod.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			ct.Eventually(t, "card 1 freed", func() bool { return cards(env.Cache, "n1") == "0:0/16 1:0/16" })
		})
	}
}

func phase(p corev1.PodPhase) func(context.Context, *ct.Env, *corev1.Pod) error {
	return func(ctx context.Context, env *ct.Env, pod *corev1.Pod) error {
		pod.Status.Phase = p
		_, err := env.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	}
}

func TestNodeChangesApplyWithoutRestart(t *testing.T) {
	pods := []runtime.Object{
		ct.Placed(ct.Pod("a", 10), "n1", gpushare.CardUnits{0: 10}),
		ct.Placed(ct.Pod("b", 4), "n1", gpushare.CardUnits{1: 4}),
	}
	tests := []struct {
		name string
		node *corev1.Node
		want string
	}{
		// a third card appears
		{"card added", ct.Node("n1", 16, 16, 16), "0:10/16 1:4/16 2:0/16"},
		// card 0 shrinks to 8 under a 10-unit pod: shown over-committed, takes nothing new
		{"card shrank", ct.Node("n1", 8, 16), "0:10/8 1:4/16"},
		// card 1 vanishes: the 4-unit pod still counts on a zero-size unhealthy card
		{"card vanished", ct.Node("n1", 16), "0:10/16 1:4/0!"},
		// a card turns unhealthy: its pods stay, it takes no new ones
		{"card unhealthy", ct.NodeWith("n1",
			gpushare.Device{Index: 0, Units: 16, Healthy: false}, gpushare.Device{Index: 1, Units: 16, Healthy: true}),
			"0:10/16! 1:4/16"},
		// node loses gpu-mem altogether
		{"no cards", ct.BareNode("n1"), "0:10/0! 1:4/0!"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := ct.Start(t, time.Minute, append([]runtime.Object{ct.Node("n1", 16, 16)}, pods...)...)
			if got, want := cards(env.Cache, "n1"), "0:10/16 1:4/16"; got != want {
				t.Fatalf("before: %q, want %q", got, want)
			}
			if _, err := env.Client.CoreV1().Nodes().Update(context.Background(), tc.node, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			ct.Eventually(t, "node change applied: want "+tc.want, func() bool { return cards(env.Cache, "n1") == tc.want })
		})
	}
}

func TestNodeDeleted(t *testing.T) {
	env := ct.Start(t, time.Minute, ct.Node("n1", 16), ct.Node("n2", 16),
		ct.Placed(ct.Pod("a", 4), "n2", gpushare.CardUnits{0: 4}))
	ctx := context.Background()
	for _, n := range []string{"n1", "n2"} {
		if err := env.Client.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ct.Eventually(t, "n1 forgotten", func() bool { _, ok := env.Cache.InspectNode("n1"); return !ok })
	ct.Eventually(t, "n2 kept for its pod", func() bool { return cards(env.Cache, "n2") == "0:4/0!" })
	req := request(t, ct.Pod("x", 1))
	for _, n := range []string{"n1", "n2"} {
		if err := env.Cache.Fits(n, req, binpack(t)); !errors.Is(err, cache.ErrUnknownNode) {
			t.Errorf("Fits(%s) after delete = %v, want ErrUnknownNode", n, err)
		}
	}
	if err := env.Client.CoreV1().Pods("default").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ct.Eventually(t, "n2 forgotten with its last pod", func() bool { _, ok := env.Cache.InspectNode("n2"); return !ok })
}

func TestFits(t *testing.T) {
	env := ct.Start(t, time.Minute,
		// 2 cards of 16 with 8 free each: node total 16 free, but no card has 10
		ct.Node("half", 16, 16),
		ct.Placed(ct.Pod("h0", 8), "half", gpushare.CardUnits{0: 8}),
		ct.Placed(ct.Pod("h1", 8), "half", gpushare.CardUnits{1: 8}),
		// heterogeneous: a 16 and an 8 card, accounted card by card
		ct.Node("hetero", 16, 8),
		// unhealthy 16 card beside a healthy 8 card
		ct.NodeWith("sick", gpushare.Device{Index: 0, Units: 16}, gpushare.Device{Index: 1, Units: 8, Healthy: true}),
		ct.BareNode("nogpu"),
	)
	pol := binpack(t)
	multiCard := ct.Pod("mc", 16)
	ct.SetGPU(&multiCard.Spec.Containers[0], 16, 2)
	tests := []struct {
		name string
		node string
		pod  *corev1.Pod
		want string // "" = fits
	}{
		{"half: 10 on one card", "half", ct.Pod("p", 10), "need 10 on one card; largest free 8 (card0 8/16, card1 8/16)"},
		{"half: 8 fits", "half", ct.Pod("p", 8), ""},
		{"half: 2x8 on two cards fits", "half", multiCard, ""},
		{"hetero: 12 only on the 16 card", "hetero", ct.Pod("p", 12), ""},
		{"hetero: 2x8 uses both", "hetero", multiCard, ""},
		{"hetero: 17 nowhere", "hetero", ct.Pod("p", 17), "need 17 on one card; largest free 16 (card0 16/16, card1 8/8)"},
		{"sick: 10 does not go on the unhealthy card", "sick", ct.Pod("p", 10), "need 10 on one card; largest free 8 (card0 unhealthy, card1 8/8)"},
		{"sick: 8 fits card 1", "sick", ct.Pod("p", 8), ""},
		{"sick: 2x8 needs two healthy cards", "sick", multiCard, "need 8 on each of 2 cards; 1 of 2 cards have that free (card0 unhealthy, card1 8/8)"},
		{"nogpu", "nogpu", ct.Pod("p", 1), cache.ErrNoCards.Error()},
		{"unknown", "nope", ct.Pod("p", 1), cache.ErrUnknownNode.Error()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if err := env.Cache.Fits(tc.node, request(t, tc.pod), pol); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Fits(%s) = %q, want %q", tc.node, got, tc.want)
			}
		})
	}
}

func TestReserve(t *testing.T) {
	env := ct.Start(t, time.Minute, ct.Node("hetero", 16, 8),
		ct.NodeWith("sick", gpushare.Device{Index: 0, Units: 16}, gpushare.Device{Index: 1, Units: 8, Healthy: true}))
	pol := binpack(t)
	var first cache.Reservation
	// binpack: best fit. 6 → card1 (8 free beats 16); then 6 → card0 (card1 has 2 left)
	for i, want := range []string{"0:0/16 1:6/8", "0:6/16 1:6/8"} {
		pod := ct.Pod(fmt.Sprintf("r%d", i), 6)
		r, err := env.Cache.Reserve(context.Background(), "hetero", pod, request(t, pod), pol)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = r
		}
		if got := cards(env.Cache, "hetero"); got != want {
			t.Errorf("after reserve %d: %q, want %q", i, got, want)
		}
		wantSize := int64(8)
		if i == 1 {
			wantSize = 16
		}
		for _, size := range r.CardUnits {
			if size != wantSize {
				t.Errorf("reserve %d: card size %d, want %d", i, size, wantSize)
			}
		}
	}
	// unhealthy card takes nothing, even when it is the only one with room
	pod := ct.Pod("big", 10)
	var fit *policy.FitError
	if _, err := env.Cache.Reserve(context.Background(), "sick", pod, request(t, pod), pol); !errors.As(err, &fit) {
		t.Errorf("reserve 10 on sick: got %v, want a FitError", err)
	}
	if got, want := cards(env.Cache, "sick"), "0:0/16! 1:0/8"; got != want {
		t.Errorf("sick after refused reserve: %q, want %q", got, want)
	}
	// A refused Binding frees the cards; a second Finish does nothing.
	env.Cache.Finish(first, cache.BindRefused)
	env.Cache.Finish(first, cache.BindRefused)
	if got, want := cards(env.Cache, "hetero"), "0:6/16 1:0/8"; got != want {
		t.Errorf("after release: %q, want %q", got, want)
	}
}

func TestReservationLifecycle(t *testing.T) {
	const ttl = 2 * time.Minute
	ctx := context.Background()
	env := ct.Start(t, ttl, ct.Node("n1", 16, 16), ct.Pod("stays", 6), ct.Pod("lost", 4))
	pol := binpack(t)
	for _, name := range []string{"stays", "lost"} {
		pod, err := env.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rsv, err := env.Cache.Reserve(ctx, "n1", pod, request(t, pod), pol)
		if err != nil {
			t.Fatal(err)
		}
		env.Cache.Finish(rsv, cache.BindUnknown) // a Binding in flight would keep it held
	}
	if got, want := cards(env.Cache, "n1"), "0:10/16 1:0/16"; got != want {
		t.Fatalf("after reserve: %q, want %q", got, want)
	}
	// "stays" shows up bound with its annotations: the reservation becomes the placed pod.
	n, _ := env.Cache.InspectNode("n1")
	bound := ct.Placed(ct.Pod("stays", 6), "n1", gpushare.CardUnits{0: 6})
	if _, err := env.Client.CoreV1().Pods("default").Update(ctx, bound, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ct.Eventually(t, "reservation of 'stays' became a placed pod", func() bool {
		n, _ = env.Cache.InspectNode("n1")
		for _, p := range n.Cards[0].Pods {
			if p.Name == "stays" {
				return !p.Reserved
			}
		}
		return false
	})
	if got, want := cards(env.Cache, "n1"), "0:10/16 1:0/16"; got != want {
		t.Errorf("after bound: %q, want %q (no double counting)", got, want)
	}
	// Just before the TTL nothing expires; after it, only the lost reservation goes (the
	// API server shows its pod unbound).
	env.Clock.Step(ttl - time.Second)
	env.Cache.ExpireNow(ctx)
	if got, want := cards(env.Cache, "n1"), "0:10/16 1:0/16"; got != want {
		t.Errorf("before TTL: %q, want %q", got, want)
	}
	ct.Eventually(t, "lost reservation expired", func() bool {
		env.Clock.Step(time.Minute)
		return cards(env.Cache, "n1") == "0:6/16 1:0/16"
	})
}

// TestFitsAgreesWithPlace holds the allocation-free filter shortcut to the policy's Place
// on every single-container request against a spread of card states.
func TestFitsAgreesWithPlace(t *testing.T) {
	var objs []runtime.Object
	var nodes []string
	for i := 0; i < 40; i++ {
		name := fmt.Sprintf("n%d", i)
		nodes = append(nodes, name)
		devs := make([]gpushare.Device, 1+i%6)
		for j := range devs {
			devs[j] = gpushare.Device{Index: j, Units: int64(8 + 8*((i+j)%2)), Healthy: (i+j)%5 != 0}
		}
		objs = append(objs, ct.NodeWith(name, devs...))
		for j := range devs {
			if used := int64((i*3 + j*5) % 9); used > 0 {
				objs = append(objs, ct.Placed(ct.Pod(fmt.Sprintf("p%d-%d", i, j), used), name, gpushare.CardUnits{j: used}))
			}
		}
	}
	env := ct.Start(t, time.Minute, objs...)
	for _, polName := range policy.Names() {
		pol, err := policy.New(polName)
		if err != nil {
			t.Fatal(err)
		}
		for mem := int64(1); mem <= 30; mem++ {
			for count := int64(1); count <= 6; count++ {
				if mem%count != 0 {
					continue
				}
				pod := ct.Pod("q", mem)
				ct.SetGPU(&pod.Spec.Containers[0], mem, count)
				req := request(t, pod)
				for _, n := range nodes {
					info, _ := env.Cache.InspectNode(n)
					pn := policy.Node{Name: n}
					for _, c := range info.Cards {
						pn.Cards = append(pn.Cards, policy.Card{Index: c.Index, Total: c.Total, Used: c.Used, Healthy: c.Healthy})
					}
					_, placeErr := pol.Place(pn, req)
					fitErr := env.Cache.Fits(n, req, pol)
					if (placeErr == nil) != (fitErr == nil) {
						t.Errorf("%s %s mem=%d count=%d: Fits=%v Place=%v", polName, n, mem, count, fitErr, placeErr)
					}
				}
			}
		}
	}
}

// TestFitsReasonFollowsNodeChanges: a remembered shortfall is forgotten as soon as the
// node's pods change.
func TestFitsReasonFollowsNodeChanges(t *testing.T) {
	env := ct.Start(t, time.Minute, ct.Node("n1", 16), ct.Placed(ct.Pod("a", 8), "n1", gpushare.CardUnits{0: 8}))
	pol := binpack(t)
	req := request(t, ct.Pod("p", 10))
	for i := 0; i < 2; i++ { // second call answers from the memo
		if err := env.Cache.Fits("n1", req, pol); err == nil || err.Error() != "need 10 on one card; largest free 8 (card0 8/16)" {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	other := ct.Pod("b", 2)
	if _, err := env.Cache.Reserve(context.Background(), "n1", other, request(t, other), pol); err != nil {
		t.Fatal(err)
	}
	if err := env.Cache.Fits("n1", req, pol); err == nil || err.Error() != "need 10 on one card; largest free 6 (card0 6/16)" {
		t.Fatalf("after reserve: %v", err)
	}
	if err := env.Client.CoreV1().Pods("default").Delete(context.Background(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ct.Eventually(t, "10 fits once pod a is gone", func() bool { return env.Cache.Fits("n1", req, pol) == nil })
}
