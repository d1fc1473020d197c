package deviceplugin

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// ambiguous reads gpushare_plugin_allocate_ambiguous_total{reason}.
func (e *testEnv) ambiguous(t *testing.T, reason string) float64 {
	t.Helper()
	var m dto.Metric
	if err := e.plugin.ambiguous.WithLabelValues(reason).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// Kubelet admits b (created after a, same size) first: kubelet's PodResources shows b
// listed with its container lacking devices, so b gets its own card 1, then a its card 0.
// Picking by age alone would hand b a's card 0 and a b's card 1.
func TestAllocateServesThePodKubeletAdmits(t *testing.T) {
	four := []ctr{{name: "main", units: 4}}
	e := newTestEnv(t, "t4:2",
		makePod("a", 1, 10, four, app(gpushare.CardUnits{0: 4})),
		makePod("b", 2, 11, four, app(gpushare.CardUnits{1: 4})),
	)
	kubelet := e.withPodResources(t)

	kubelet.set(kubeletPod("b", false, "main"))
	got, err := e.allocate(t, 4)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(env("4", "4", 1), got); diff != "" {
		t.Errorf("b's Allocate env (-want,+got):\n%s", diff)
	}

	kubelet.set(kubeletPod("b", true, "main"), kubeletPod("a", false, "main"))
	if got, err = e.allocate(t, 4); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(env("4", "4", 0), got); diff != "" {
		t.Errorf("a's Allocate env (-want,+got):\n%s", diff)
	}

	for pod, want := range map[string][3]string{
		"a": {`{"0":{"0":4}}`, "app/0", "true"},
		"b": {`{"0":{"1":4}}`, "app/0", "true"},
	} {
		ann := e.podAnnotations(t, pod)
		got := [3]string{ann[gpushare.AnnotationAllocation], ann[gpushare.AnnotationAllocated], ann[gpushare.AnnotationAssigned]}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("pod %s {allocation, allocated, assigned} (-want,+got):\n%s", pod, diff)
		}
	}
	for _, reason := range []string{ambiguousSeveral, ambiguousNone, ambiguousUnavailable} {
		if n := e.ambiguous(t, reason); n != 0 {
			t.Errorf("ambiguous{reason=%q} = %v, want 0", reason, n)
		}
	}
}

// When kubelet's PodResources does not single out one pod, Allocate serves the oldest
// matching pod (a, card 0) as before, and counts why.
func TestAllocateFallsBackToTheOldestPod(t *testing.T) {
	four := []ctr{{name: "main", units: 4}}
	tests := []struct {
		name    string
		kubelet []*podresourcesapi.PodResources // nil: no PodResources server at all
		reason  string
	}{
		{name: "socket absent", reason: ambiguousUnavailable},
		{name: "both pods admitting", kubelet: []*podresourcesapi.PodResources{kubeletPod("a", false, "main"), kubeletPod("b", false, "main")}, reason: ambiguousSeveral},
		{name: "neither pod admitting", kubelet: []*podresourcesapi.PodResources{kubeletPod("a", true, "main"), kubeletPod("other", false, "main")}, reason: ambiguousNone},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, "t4:2",
				makePod("a", 1, 10, four, app(gpushare.CardUnits{0: 4})),
				makePod("b", 2, 11, four, app(gpushare.CardUnits{1: 4})),
			)
			if tc.kubelet == nil {
				e.plugin.cfg.PodResourcesSocket = filepath.Join(e.dir, "absent.sock")
			} else {
				e.withPodResources(t).set(tc.kubelet...)
			}
			got, err := e.allocate(t, 4)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(env("4", "4", 0), got); diff != "" {
				t.Errorf("Allocate env (-want,+got):\n%s", diff)
			}
			if n := e.ambiguous(t, tc.reason); n != 1 {
				t.Errorf("ambiguous{reason=%q} = %v, want 1", tc.reason, n)
			}
			if tc.kubelet == nil && !e.plugin.listFailing {
				t.Error("an unreachable PodResources socket is not remembered as failing")
			}
		})
	}
}

func TestKubeletPodsAdmitting(t *testing.T) {
	init := makePod("i", 1, 10, []ctr{{name: "setup", units: 2, init: true}, {name: "main", units: 2}},
		gpushare.PodAllocation{Init: gpushare.Allocation{0: {0: 2}}, App: gpushare.Allocation{0: {0: 2}}})
	res := gpushare.DefaultResources()
	req, err := res.PodRequest(init)
	if err != nil {
		t.Fatal(err)
	}
	kp := kubeletPods{"default/i": {"main": false}, "default/j": {"main": true}}
	tests := []struct {
		name string
		c    candidate
		want bool
	}{
		// Regular init containers are not listed: the pod being listed is enough.
		{name: "init container of a listed pod", c: candidate{pod: init, cont: req.Containers[0]}, want: true},
		{name: "app container without devices", c: candidate{pod: init, cont: req.Containers[1]}, want: true},
		{name: "app container with devices", c: candidate{pod: makePod("j", 1, 10, []ctr{{name: "main", units: 2}}, app()), cont: gpushare.ContainerRequest{Name: "main"}}, want: false},
		{name: "pod not listed", c: candidate{pod: makePod("k", 1, 10, []ctr{{name: "main", units: 2}}, app()), cont: gpushare.ContainerRequest{Name: "main"}}, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := kp.admitting(tc.c); got != tc.want {
				t.Errorf("admitting = %v, want %v", got, tc.want)
			}
		})
	}
}

// GetPreferredAllocation steers kubelet to the card of the pod kubelet is admitting (b,
// card 1), not of the oldest pod of that size (a, card 0).
func TestGetPreferredAllocationFollowsPodResources(t *testing.T) {
	two := []ctr{{name: "main", units: 2}}
	e := newTestEnv(t, "t4:2",
		makePod("a", 1, 10, two, app(gpushare.CardUnits{0: 2})),
		makePod("b", 2, 11, two, app(gpushare.CardUnits{1: 2})),
	)
	e.withPodResources(t).set(kubeletPod("b", false, "main"))
	avail := availableIDs(2, 3)
	resp, err := e.plugin.GetPreferredAllocation(context.Background(), &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{AvailableDeviceIDs: avail, AllocationSize: 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{gpushare.FakeDeviceID(uuid(1), 0), gpushare.FakeDeviceID(uuid(1), 1)}
	if diff := cmp.Diff(want, resp.ContainerResponses[0].DeviceIDs); diff != "" {
		t.Errorf("preferred IDs (-want,+got):\n%s", diff)
	}
}
