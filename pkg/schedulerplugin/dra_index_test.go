package schedulerplugin

import (
	"context"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

// waitDRASynced waits until the plugin's DRA index has synced, so that PreScore reads it.
func waitDRASynced(t testing.TB, f *fixture) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for f.pl.draIndex != nil && !f.pl.draIndex.ready() {
		if time.Now().After(deadline) {
			t.Fatal("DRA index not synced after 30s")
		}
		time.Sleep(time.Millisecond)
	}
}

// indexedView is the view of every node the index gives over slices, with tracker d;
// memo (nil: none kept) keeps nodes between calls.
func indexedView(t testing.TB, x *draIndex, memo *draNodeMemo, sl []*resourceapi.ResourceSlice, d *fakeDRA) string {
	t.Helper()
	if memo == nil {
		memo = &draNodeMemo{}
	}
	v, err := readIndexedView(x, memo, nil, sl, nil, d.ResourceClaims())
	if err != nil {
		t.Fatal(err)
	}
	return fullString(v)
}

// fullString is viewString with every card holding more than its total shown as full:
// a card filled by unreadable consumed memory may show more in one order of the claims
// than in another, and is full either way.
func fullString(v *draView) string {
	for _, n := range v.nodes {
		for i := range n.cards {
			n.cards[i].Used = min(n.cards[i].Used, n.cards[i].Total)
		}
	}
	return viewString(v)
}

// TestDRAIndexFollowsInformers: after each change through the API, the index's view (its
// claims by pool) becomes the view read from scratch from every slice and claim, and
// hasSlices says whether there is a gpushare slice.
func TestDRAIndexFollowsInformers(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	rf := factory.Resource().V1()
	x, err := newDRAIndex(rf.ResourceSlices().Informer(), rf.ResourceClaims().Informer())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	for !x.ready() {
		time.Sleep(time.Millisecond)
	}
	// Readers run beside the handlers throughout (go test -race), sharing one memo of nodes
	// with the checks below, which keep another.
	var shared, kept draNodeMemo
	readers, stop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(readers)
		for {
			select {
			case <-stop:
				return
			default:
				sl, _ := rf.ResourceSlices().Lister().List(labels.Everything())
				_, _ = readIndexedView(x, &shared, nil, sl, nil, (&fakeDRA{}).ResourceClaims())
				_ = x.hasSlices()
			}
		}
	}()
	defer func() { close(stop); <-readers }()

	slices, claims := client.ResourceV1().ResourceSlices(), client.ResourceV1().ResourceClaims("default")
	other := draSlice(t, "cpu", gpushare.GiB, []int64{16})
	other.Name, other.Spec.Driver = "cpu-other", "other.example.com"
	moved := allocated("a", held{"n2", "gpu-1", "4Gi"})
	twoPools := allocated("b", held{"n1", "gpu-0", "2Gi"}, held{"n2", "gpu-0", "3Gi"})
	lost := allocated("lost", held{"n1", "gpu-7", "1Gi"})
	newer := draSlice(t, "n1", gpushare.GiB, []int64{16, 16, 16})
	newer.Spec.Pool.Generation = 2
	extra := draSlice(t, "n2", gpushare.GiB, []int64{8})
	extra.Name, extra.Spec.Pool.Name = "n2-extra", "n2-extra"
	extra.Spec.Devices[0].Attributes[gpushare.DRAAttributeIndex] = resourceapi.DeviceAttribute{IntValue: ptr.To[int64](5)}
	onExtra := allocated("e", held{"n2-extra", "gpu-0", "3Gi"})
	deallocated := moved.DeepCopy()
	deallocated.Status.Allocation = nil
	steps := []struct {
		name string
		do   func() error
	}{
		{"a slice of another driver", func() error { _, err := slices.Create(ctx, other, metav1.CreateOptions{}); return err }},
		{"slice n1", func() error {
			_, err := slices.Create(ctx, draSlice(t, "n1", gpushare.GiB, []int64{16, 16}), metav1.CreateOptions{})
			return err
		}},
		{"slice n2", func() error {
			_, err := slices.Create(ctx, draSlice(t, "n2", gpushare.GiB, []int64{16, 16}), metav1.CreateOptions{})
			return err
		}},
		{"claim a on n1", func() error {
			_, err := claims.Create(ctx, allocated("a", held{"n1", "gpu-0", "4Gi"}), metav1.CreateOptions{})
			return err
		}},
		{"claim b on two pools", func() error { _, err := claims.Create(ctx, twoPools, metav1.CreateOptions{}); return err }},
		{"a pending claim", func() error {
			_, err := claims.Create(ctx, pending("p", ask("4Gi", 1)), metav1.CreateOptions{})
			return err
		}},
		{"claim a moves to n2", func() error { _, err := claims.Update(ctx, moved, metav1.UpdateOptions{}); return err }},
		{"claim a deallocated", func() error { _, err := claims.Update(ctx, deallocated, metav1.UpdateOptions{}); return err }},
		{"a second pool on n2", func() error { _, err := slices.Create(ctx, extra, metav1.CreateOptions{}); return err }},
		{"a claim in n2's second pool", func() error { _, err := claims.Create(ctx, onExtra, metav1.CreateOptions{}); return err }},
		{"a claim on a device n1 does not list", func() error { _, err := claims.Create(ctx, lost, metav1.CreateOptions{}); return err }},
		{"n1's next generation", func() error { _, err := slices.Update(ctx, newer, metav1.UpdateOptions{}); return err }},
		{"claim lost deleted", func() error { return claims.Delete(ctx, "lost", metav1.DeleteOptions{}) }},
		{"claim b deleted", func() error { return claims.Delete(ctx, "b", metav1.DeleteOptions{}) }},
		{"slice n2 deleted", func() error { return slices.Delete(ctx, "n2-"+gpushare.DRADriverName, metav1.DeleteOptions{}) }},
		{"slice n1 deleted", func() error { return slices.Delete(ctx, "n1-"+gpushare.DRADriverName, metav1.DeleteOptions{}) }},
	}
	sliceLister, claimLister := rf.ResourceSlices().Lister(), rf.ResourceClaims().Lister()
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		var got, gotKept, want string
		var gotAny, wantAny bool
		deadline := time.Now().Add(10 * time.Second)
		for {
			sl, _ := sliceLister.List(labels.Everything())
			cls, _ := claimLister.List(labels.Everything())
			want = fullString(newDRAView(sl, cls, nil, nil))
			got = indexedView(t, x, nil, sl, &fakeDRA{})
			gotKept = indexedView(t, x, &kept, sl, &fakeDRA{})
			wantAny = false
			for _, s := range sl {
				wantAny = wantAny || s.Spec.Driver == gpushare.DRADriverName
			}
			gotAny = x.hasSlices()
			if got == want && gotKept == want && gotAny == wantAny || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if got != want || gotKept != want || gotAny != wantAny {
			t.Errorf("after %s: index view\n%s\nwith the nodes kept\n%s\nhasSlices %v; read from scratch\n%s\nhasSlices %v", st.name, got, gotKept, gotAny, want, wantAny)
		}
	}
}

// TestDRAIndexEvents: the handlers' edge cases, called directly: resync (the same object
// again), tombstones with and without the last state, objects of other types.
func TestDRAIndexEvents(t *testing.T) {
	sl := []*resourceapi.ResourceSlice{draSlice(t, "n1", gpushare.GiB, []int64{16, 16})}
	a := allocated("a", held{"n1", "gpu-0", "4Gi"})
	b := allocated("b", held{"n1", "gpu-1", "6Gi"})
	for _, tc := range []struct {
		name string
		do   func(x *draIndex)
		want string
		any  bool
	}{
		{"resync", func(x *draIndex) { x.putSlice(sl[0]); x.putSlice(sl[0]); x.putClaim(a); x.putClaim(a); x.putClaim(b) }, "n1: 0:4/16 1:6/16", true},
		{"tombstone with state", func(x *draIndex) {
			x.putClaim(a)
			x.putClaim(b)
			x.deleteClaim(toolscache.DeletedFinalStateUnknown{Key: "default/a", Obj: a})
		}, "n1: 0:0/16 1:6/16", false},
		{"tombstone without state", func(x *draIndex) {
			x.putClaim(a)
			x.deleteClaim(toolscache.DeletedFinalStateUnknown{Key: "default/a"})
			x.deleteSlice(toolscache.DeletedFinalStateUnknown{Key: sl[0].Name})
		}, "n1: 0:0/16 1:0/16", false},
		{"slice tombstone", func(x *draIndex) {
			x.putSlice(sl[0])
			x.deleteSlice(toolscache.DeletedFinalStateUnknown{Key: sl[0].Name, Obj: sl[0]})
		}, "n1: 0:0/16 1:0/16", false},
		{"slice of another driver replaces it", func(x *draIndex) {
			x.putSlice(sl[0])
			o := sl[0].DeepCopy()
			o.Spec.Driver = "other.example.com"
			x.putSlice(o)
		}, "n1: 0:0/16 1:0/16", false},
		{"other types", func(x *draIndex) {
			x.putSlice(sl[0])
			x.putClaim("junk")
			x.deleteClaim(42)
			x.putSlice(a)
			x.deleteSlice(nil)
		}, "n1: 0:0/16 1:0/16", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := bareDRAIndex()
			tc.do(x)
			if got := indexedView(t, x, nil, sl, &fakeDRA{}); got != tc.want {
				t.Errorf("view %q, want %q", got, tc.want)
			}
			if x.hasSlices() != tc.any {
				t.Errorf("hasSlices = %v, want %v", x.hasSlices(), tc.any)
			}
		})
	}
}

// bareDRAIndex is an index without informers, fed by calling its handlers.
func bareDRAIndex() *draIndex {
	return &draIndex{
		slices:   map[string]struct{}{},
		claims:   map[types.NamespacedName]*resourceapi.ResourceClaim{},
		pools:    map[string]map[types.NamespacedName]*resourceapi.ResourceClaim{},
		inFlight: map[types.NamespacedName]types.UID{},
		versions: map[string]uint64{},
	}
}

// TestDRAIndexInFlight: a claim the scheduler has allocated but the informer not yet
// delivered counts from the tracker, pending or assumed, and once only when the informer
// delivers it; an unwatched one (Unreserve) counts no more.
func TestDRAIndexInFlight(t *testing.T) {
	sl := []*resourceapi.ResourceSlice{draSlice(t, "n1", gpushare.GiB, []int64{16, 16})}
	nb := allocated("nb", held{"n1", "gpu-1", "4Gi"})
	d := &fakeDRA{inFlight: map[types.UID]*resourceapi.AllocationResult{nb.UID: nb.Status.Allocation}}
	d.claims = []*resourceapi.ResourceClaim{pending("nb", ask("4Gi", 1))}
	d.claims[0].UID = nb.UID
	key := []types.NamespacedName{{Namespace: "default", Name: "nb"}}
	x := bareDRAIndex()
	x.putClaim(d.claims[0])
	x.watch(key, []types.UID{nb.UID})
	var kept draNodeMemo
	check := func(when, want string) {
		t.Helper()
		if got := indexedView(t, x, nil, sl, d); got != want {
			t.Errorf("%s: view %q, want %q", when, got, want)
		}
		if got := indexedView(t, x, &kept, sl, d); got != want {
			t.Errorf("%s: with the nodes kept, view %q, want %q", when, got, want)
		}
	}
	check("pending", "n1: 0:0/16 1:4/16")
	d.inFlight, d.claims = nil, []*resourceapi.ResourceClaim{nb}
	check("assumed", "n1: 0:0/16 1:4/16")
	x.putClaim(nb)
	check("delivered", "n1: 0:0/16 1:4/16")
	if len(x.inFlight) != 0 {
		t.Errorf("delivered claim still watched: %v", x.inFlight)
	}
	x.deleteClaim(nb)
	x.watch(key, []types.UID{nb.UID})
	x.unwatch(key)
	check("unwatched", "n1: 0:0/16 1:0/16")
	d.err = errTracker
	x.watch(key, []types.UID{nb.UID})
	if _, err := readIndexedView(x, &kept, nil, sl, nil, d.ResourceClaims()); err == nil {
		t.Error("a failing tracker: no error")
	}
}

// TestDRANoSlicesReadsNothing: in a cluster without a gpushare ResourceSlice, scoring a pod
// that asks no GPU memory under fgd lists neither slices nor claims (the listers fail here,
// and PreScore still succeeds).
func TestDRANoSlicesReadsNothing(t *testing.T) {
	cl := allocated("other", held{"n1", "gpu-0", "1Gi"})
	cl.Status.Allocation.Devices.Results[0].Driver = "other.example.com"
	d := &fakeDRA{claims: []*resourceapi.ResourceClaim{cl}}
	f := startWithDRA(t, &GPUShareArgs{Policy: "fgd"}, d, ct.BareNode("n1"))
	d.err = errTracker
	if _, status := draScores(t, f, ct.Pod("cpu", 0), "n1"); status != nil {
		t.Errorf("PreScore = %v, want success without reading DRA objects", status)
	}
}

// TestReserveWatchesClaims: Reserve of a claim pod hands the index the claims
// DynamicResources allocated (pending in the tracker); Unreserve takes them back.
func TestReserveWatchesClaims(t *testing.T) {
	nb := allocated("nb", held{"n1", "gpu-1", "4Gi"})
	d := &fakeDRA{
		slices:   []*resourceapi.ResourceSlice{draSlice(t, "n1", gpushare.GiB, []int64{16, 16})},
		claims:   []*resourceapi.ResourceClaim{pending("nb", ask("4Gi", 1))},
		inFlight: map[types.UID]*resourceapi.AllocationResult{nb.UID: nb.Status.Allocation},
	}
	f := startWithDRA(t, &GPUShareArgs{Policy: "fgd"}, d, ct.BareNode("n1"))
	pod := claimPod("p", "nb")
	st, _, _ := f.prefilter(t, pod)
	if s := f.pl.Reserve(context.Background(), st, pod, "n1"); !s.IsSuccess() {
		t.Fatal(s)
	}
	if got := indexedView(t, f.pl.draIndex, &f.pl.draNodes, d.slices, d); got != "n1: 0:0/16 1:4/16" {
		t.Errorf("after Reserve: view %q, want the pending claim charged", got)
	}
	f.pl.Unreserve(context.Background(), st, pod, "n1")
	if got := indexedView(t, f.pl.draIndex, &f.pl.draNodes, d.slices, d); got != "n1: 0:0/16 1:0/16" {
		t.Errorf("after Unreserve: view %q, want nothing charged", got)
	}
}
