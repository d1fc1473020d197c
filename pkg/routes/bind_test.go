package routes_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

func (f *fixture) bind(t testing.TB, args extenderv1.ExtenderBindingArgs) extenderv1.ExtenderBindingResult {
	t.Helper()
	rec := f.do(t, http.MethodPost, "/gpushare-scheduler/bind", args)
	if rec.Code != http.StatusOK {
		t.Fatalf("bind status %d: %s", rec.Code, rec.Body)
	}
	var res extenderv1.ExtenderBindingResult
	decodeInto(t, rec, &res)
	return res
}

func (f *fixture) pod(t testing.TB, name string) *corev1.Pod {
	t.Helper()
	p, err := f.Client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func bindingsCreated(f *fixture) []string {
	var out []string
	for _, a := range f.Client.Actions() {
		if a.GetVerb() == "create" && a.GetSubresource() == "binding" {
			b := a.(k8stesting.CreateAction).GetObject().(*corev1.Binding)
			out = append(out, b.Name+"->"+b.Target.Name)
		}
	}
	return out
}

func ourAnnotations(p *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, k := range gpushare.BindAnnotationKeys() {
		if v, ok := p.Annotations[k]; ok {
			out[k] = v
		}
	}
	return out
}

func TestBindWritesAnnotationsAndBinding(t *testing.T) {
	multi := ct.Pod("multi", 16)
	ct.SetGPU(&multi.Spec.Containers[0], 16, 2)
	f := newFixture(t, ct.Node("hetero", 16, 8), ct.Node("big", 16, 16, 16), ct.AllocatableNode("old", 14, 1),
		ct.Pod("single", 6), multi, ct.Pod("legacy", 4))
	epoch := strconv.FormatInt(ct.Epoch.UnixNano(), 10)
	tests := []struct {
		name, pod, node string
		want            map[string]string
		wantCards       string
	}{
		{
			// binpack best fit: 6 goes on the 8-unit card 1
			name: "single card", pod: "single", node: "hetero",
			want: map[string]string{
				gpushare.AnnotationAllocation: `{"0":{"1":6}}`, gpushare.AnnotationPodUnits: "6",
				gpushare.AnnotationAssigned: "false", gpushare.AnnotationAssumeTime: epoch,
				gpushare.AnnotationIndex: "1", gpushare.AnnotationDevUnits: "8",
				gpushare.AnnotationUnit: "GiB",
			},
			wantCards: "0:0/16 1:6/8",
		},
		{
			// 16 over 2 cards: 8 each on cards 0 and 1; no single-card IDX/DEV
			name: "two cards", pod: "multi", node: "big",
			want: map[string]string{
				gpushare.AnnotationAllocation: `{"0":{"0":8,"1":8}}`, gpushare.AnnotationPodUnits: "16",
				gpushare.AnnotationAssigned: "false", gpushare.AnnotationAssumeTime: epoch,
				gpushare.AnnotationUnit: "GiB",
			},
			wantCards: "0:8/16 1:8/16 2:0/16",
		},
		{
			// a node without inventory annotation states no unit: the record names none
			name: "unit unknown", pod: "legacy", node: "old",
			want: map[string]string{
				gpushare.AnnotationAllocation: `{"0":{"0":4}}`, gpushare.AnnotationPodUnits: "4",
				gpushare.AnnotationAssigned: "false", gpushare.AnnotationAssumeTime: epoch,
				gpushare.AnnotationIndex: "0", gpushare.AnnotationDevUnits: "14",
			},
			wantCards: "0:4/14",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := f.pod(t, tc.pod)
			res := f.bind(t, extenderv1.ExtenderBindingArgs{PodName: p.Name, PodNamespace: p.Namespace, PodUID: p.UID, Node: tc.node})
			if res.Error != "" {
				t.Fatalf("bind error: %s", res.Error)
			}
			if d := cmp.Diff(tc.want, ourAnnotations(f.pod(t, tc.pod))); d != "" {
				t.Errorf("annotations (-want,+got):\n%s", d)
			}
			if got := bindingsCreated(f); !contains(got, tc.pod+"->"+tc.node) {
				t.Errorf("bindings %v lack %s->%s", got, tc.pod, tc.node)
			}
			ct.Eventually(t, "informer sees the bound pod", func() bool {
				n, _ := f.Cache.InspectNode(tc.node)
				for _, c := range n.Cards {
					for _, p := range c.Pods {
						if p.Name == tc.pod {
							return !p.Reserved
						}
					}
				}
				return false
			})
			if got := summary(f, tc.node); got != tc.wantCards {
				t.Errorf("cards %q, want %q", got, tc.wantCards)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// summary is "idx:used/total" per card of a node.
func summary(f *fixture, node string) string {
	n, _ := f.Cache.InspectNode(node)
	var parts []string
	for _, c := range n.Cards {
		parts = append(parts, fmt.Sprintf("%d:%d/%d", c.Index, c.Used, c.Total))
	}
	return strings.Join(parts, " ")
}

func TestBindFailures(t *testing.T) {
	tests := []struct {
		name      string
		args      extenderv1.ExtenderBindingArgs
		reactor   func(f *fixture)
		wantError string // substring
		patched   bool   // the annotation patch was attempted
	}{
		{
			name:      "uid mismatch",
			args:      extenderv1.ExtenderBindingArgs{PodName: "p", PodNamespace: "default", PodUID: "other-uid", Node: "n1"},
			wantError: "has UID uid-p, bind asked for other-uid",
		},
		{
			name:      "pod not found",
			args:      extenderv1.ExtenderBindingArgs{PodName: "nope", PodNamespace: "default", PodUID: "uid-nope", Node: "n1"},
			wantError: `looking up pod default/nope: pods "nope" not found`,
		},
		{
			name:      "does not fit",
			args:      extenderv1.ExtenderBindingArgs{PodName: "huge", PodNamespace: "default", PodUID: "uid-huge", Node: "n1"},
			wantError: "gpu-mem: need 20 on one card; largest free 16 (card0 16/16)",
		},
		{
			name: "binding refused: reservation released, nothing written",
			args: extenderv1.ExtenderBindingArgs{PodName: "p", PodNamespace: "default", PodUID: "uid-p", Node: "n1"},
			reactor: func(f *fixture) {
				f.Client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
					return a.GetSubresource() == "binding", nil, apierrors.NewForbidden(podsGVR.GroupResource(), "p", errors.New("admission says no"))
				})
			},
			wantError: "admission says no (pod not bound; reservation released)",
		},
		{
			name: "stale annotations cannot be removed: reservation released",
			args: extenderv1.ExtenderBindingArgs{PodName: "stale", PodNamespace: "default", PodUID: "uid-stale", Node: "n1"},
			reactor: func(f *fixture) {
				f.Client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("admission says no")
				})
			},
			wantError: "admission says no",
			patched:   true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stale := ct.Pod("stale", 6)
			stale.Annotations = map[string]string{gpushare.AnnotationAllocated: "app/0"}
			f := newFixture(t, ct.Node("n1", 16), ct.Pod("p", 6), ct.Pod("huge", 20), stale)
			if tc.reactor != nil {
				tc.reactor(f)
			}
			res := f.bind(t, tc.args)
			if !strings.Contains(res.Error, tc.wantError) {
				t.Fatalf("error %q, want it to contain %q", res.Error, tc.wantError)
			}
			if got := summary(f, "n1"); got != "0:0/16" {
				t.Errorf("cards after failed bind %q, want 0:0/16 (reservation released)", got)
			}
			if d := cmp.Diff(map[string]string{}, ourAnnotations(f.pod(t, "p"))); d != "" {
				t.Errorf("annotations left on the pod (-want,+got):\n%s", d)
			}
			if got := bindingsCreated(f); tc.reactor == nil && len(got) != 0 {
				t.Errorf("bindings created: %v", got)
			}
			var patches int
			for _, a := range f.Client.Actions() {
				if a.GetVerb() == "patch" {
					patches++
				}
			}
			if (patches > 0) != tc.patched {
				t.Errorf("%d patches, want patched=%v", patches, tc.patched)
			}
		})
	}
}

// TestBindIsOneWrite: the allocation travels on the Binding (the API server copies its
// annotations onto the pod with nodeName): no patch, and the Binding carries them.
func TestBindIsOneWrite(t *testing.T) {
	f := newFixture(t, ct.Node("n1", 16), ct.Pod("p", 6))
	if res := f.bind(t, extenderv1.ExtenderBindingArgs{PodName: "p", PodNamespace: "default", PodUID: "uid-p", Node: "n1"}); res.Error != "" {
		t.Fatal(res.Error)
	}
	var writes []string
	var binding *corev1.Binding
	for _, a := range f.Client.Actions() {
		switch a.GetVerb() {
		case "create", "patch", "update":
			writes = append(writes, a.GetVerb()+"/"+a.GetSubresource())
			if a.GetSubresource() == "binding" {
				binding = a.(k8stesting.CreateAction).GetObject().(*corev1.Binding)
			}
		}
	}
	if d := cmp.Diff([]string{"create/binding"}, writes); d != "" {
		t.Errorf("API writes (-want,+got):\n%s", d)
	}
	if binding == nil || binding.UID != "uid-p" || binding.Annotations[gpushare.AnnotationAllocation] != `{"0":{"0":6}}` {
		t.Errorf("binding = %+v, want UID precondition uid-p and the allocation annotation", binding)
	}
}

// TestBindPodLookup: bind reads a pod the cache's informer holds from there (no API read),
// and one it does not hold yet from the API server.
func TestBindPodLookup(t *testing.T) {
	gets := func(f *fixture) int {
		n := 0
		for _, a := range f.Client.Actions() {
			if a.GetVerb() == "get" && a.GetResource().Resource == "pods" {
				n++
			}
		}
		return n
	}
	t.Run("from the informer", func(t *testing.T) {
		f := newFixture(t, ct.Node("n1", 16), ct.Pod("p", 6))
		if res := f.bind(t, extenderv1.ExtenderBindingArgs{PodName: "p", PodNamespace: "default", PodUID: "uid-p", Node: "n1"}); res.Error != "" {
			t.Fatal(res.Error)
		}
		if n := gets(f); n != 0 {
			t.Errorf("%d API reads of pods, want 0", n)
		}
	})
	t.Run("from the API server", func(t *testing.T) {
		f := newFixture(t, ct.Node("n1", 16))
		// Only GET knows this pod: the informer never sees it, as for a pod created a moment
		// before its bind.
		late := ct.Pod("late", 6)
		late.Annotations = map[string]string{gpushare.AnnotationAllocated: "app/0"} // stale
		f.Client.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			return a.(k8stesting.GetAction).GetName() == "late", late.DeepCopy(), nil
		})
		var binding *corev1.Binding
		f.Client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() != "binding" {
				return false, nil, nil
			}
			binding = a.(k8stesting.CreateAction).GetObject().(*corev1.Binding)
			return true, binding, nil
		})
		f.Client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, late.DeepCopy(), nil
		})
		if res := f.bind(t, extenderv1.ExtenderBindingArgs{PodName: "late", PodNamespace: "default", PodUID: "uid-late", Node: "n1"}); res.Error != "" {
			t.Fatal(res.Error)
		}
		if binding == nil || binding.UID != "uid-late" || binding.Annotations[gpushare.AnnotationAllocation] != `{"0":{"0":6}}` {
			t.Errorf("binding = %+v, want UID precondition uid-late and the allocation annotation", binding)
		}
		var patch string
		for _, a := range f.Client.Actions() {
			if a.GetVerb() == "patch" {
				patch = string(a.(k8stesting.PatchAction).GetPatch())
			}
		}
		if !strings.Contains(patch, `"`+gpushare.AnnotationAllocated+`":null`) {
			t.Errorf("patch %q does not delete the stale %s", patch, gpushare.AnnotationAllocated)
		}
		if got := summary(f, "n1"); got != "0:6/16" {
			t.Errorf("cards after bind %q, want 0:6/16 (reserved)", got)
		}
	})
}

// TestBindRemovesStaleAnnotations: a pod created with bind annotations it should not have
// (copied from another pod) gets them deleted before the Binding adds the new ones.
func TestBindRemovesStaleAnnotations(t *testing.T) {
	p := ct.Pod("p", 6)
	p.Annotations = map[string]string{
		gpushare.AnnotationAllocated:      "app/0",
		gpushare.AnnotationInitAllocation: `{"0":{"3":2}}`,
		gpushare.AnnotationIndex:          "3",
		"keep.example.com/note":           "mine",
	}
	f := newFixture(t, ct.Node("n1", 16), p)
	if res := f.bind(t, extenderv1.ExtenderBindingArgs{PodName: "p", PodNamespace: "default", PodUID: "uid-p", Node: "n1"}); res.Error != "" {
		t.Fatal(res.Error)
	}
	got := f.pod(t, "p").Annotations
	for _, k := range []string{gpushare.AnnotationAllocated, gpushare.AnnotationInitAllocation} {
		if v, ok := got[k]; ok {
			t.Errorf("stale %s=%q survived the bind", k, v)
		}
	}
	if got[gpushare.AnnotationIndex] != "0" || got["keep.example.com/note"] != "mine" {
		t.Errorf("annotations after bind: %v", got)
	}
}

// TestConcurrentBinds: 100 binds of 6-unit pods race for one node of 8 cards × 16 units.
// Each card holds two (12 ≤ 16 < 18), so exactly 16 succeed and no card ever holds more
// than 16.
func TestConcurrentBinds(t *testing.T) {
	objs := []runtime.Object{ct.Node("n1", 16, 16, 16, 16, 16, 16, 16, 16)}
	for i := 0; i < 100; i++ {
		objs = append(objs, ct.Pod(fmt.Sprintf("p%03d", i), 6))
	}
	f := newFixture(t, objs...)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok       int
		overfull []string
	)
	stop := make(chan struct{})
	watcher := make(chan struct{})
	go func() { // samples the cards while binds run
		defer close(watcher)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, _ := f.Cache.InspectNode("n1")
			for _, c := range n.Cards {
				if c.Used > c.Total {
					mu.Lock()
					overfull = append(overfull, fmt.Sprintf("card%d %d/%d", c.Index, c.Used, c.Total))
					mu.Unlock()
				}
			}
		}
	}()
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			res := f.bind(t, extenderv1.ExtenderBindingArgs{PodName: name, PodNamespace: "default", PodUID: types.UID("uid-" + name), Node: "n1"})
			if res.Error == "" {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		}(fmt.Sprintf("p%03d", i))
	}
	wg.Wait()
	close(stop)
	<-watcher
	if ok != 16 {
		t.Errorf("%d binds succeeded, want 16", ok)
	}
	if len(overfull) > 0 {
		t.Errorf("cards over capacity during binds: %v", overfull)
	}
	want := "0:12/16 1:12/16 2:12/16 3:12/16 4:12/16 5:12/16 6:12/16 7:12/16"
	ct.Eventually(t, "all 16 placed, none reserved", func() bool {
		n, _ := f.Cache.InspectNode("n1")
		for _, c := range n.Cards {
			for _, p := range c.Pods {
				if p.Reserved {
					return false
				}
			}
		}
		return summary(f, "n1") == want
	})
	// every card index written to an annotation holds exactly two pods
	perCard := map[string]int{}
	pods, err := f.Client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if idx, ok := p.Annotations[gpushare.AnnotationIndex]; ok {
			perCard[idx]++
		}
	}
	wantPerCard := map[string]int{"0": 2, "1": 2, "2": 2, "3": 2, "4": 2, "5": 2, "6": 2, "7": 2}
	if d := cmp.Diff(wantPerCard, perCard); d != "" {
		t.Errorf("pods per card from annotations (-want,+got):\n%s", d)
	}
}
