package deviceplugin

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// env is the Allocate answer for a container on the given cards (of 14-unit T4s).
func env(podUnits, ctrUnits string, cards ...int) map[string]string {
	var uuids, idx []string
	for _, c := range cards {
		uuids = append(uuids, uuid(c))
		idx = append(idx, strings.TrimSpace(string(rune('0'+c))))
	}
	return map[string]string{
		gpushare.EnvVisibleDevices: strings.Join(uuids, ","),
		gpushare.EnvIndex:          strings.Join(idx, ","),
		gpushare.EnvPodUnits:       podUnits,
		gpushare.EnvContainerUnits: ctrUnits,
		gpushare.EnvDevUnits:       "14",
	}
}

// step is one Allocate call and what it must return and leave on the pods.
type step struct {
	units    int
	wantEnv  map[string]string
	wantCode codes.Code           // non-OK: Allocate must fail with this code
	wantPods map[string][2]string // pod → {allocated-containers, ASSIGNED} after the call
}

func TestAllocate(t *testing.T) {
	four := []ctr{{name: "main", units: 4}}
	tests := []struct {
		name  string
		spec  string
		pods  []runtime.Object
		steps []step
	}{
		{
			// Kubelet admits the older pod first; each gets its own card although both ask 4.
			name: "same size, bound in creation order",
			spec: "t4:2",
			pods: []runtime.Object{
				makePod("a", 1, 10, four, app(gpushare.CardUnits{1: 4})),
				makePod("b", 2, 11, four, app(gpushare.CardUnits{0: 4})),
			},
			steps: []step{
				{units: 4, wantEnv: env("4", "4", 1), wantPods: map[string][2]string{"a": {"app/0", "true"}, "b": {"", "false"}}},
				{units: 4, wantEnv: env("4", "4", 0), wantPods: map[string][2]string{"a": {"app/0", "true"}, "b": {"app/0", "true"}}},
			},
		},
		{
			// The extender bound b before a; kubelet still admits by creation time.
			name: "same size, bound in reverse order",
			spec: "t4:2",
			pods: []runtime.Object{
				makePod("a", 1, 11, four, app(gpushare.CardUnits{0: 4})),
				makePod("b", 2, 10, four, app(gpushare.CardUnits{1: 4})),
			},
			steps: []step{
				{units: 4, wantEnv: env("4", "4", 0), wantPods: map[string][2]string{"a": {"app/0", "true"}, "b": {"", "false"}}},
				{units: 4, wantEnv: env("4", "4", 1), wantPods: map[string][2]string{"b": {"app/0", "true"}}},
			},
		},
		{
			// Two containers of the same size on different cards: one Allocate each, in
			// spec order; ASSIGNED only after the second.
			name: "two containers of one pod",
			spec: "t4:2",
			pods: []runtime.Object{
				makePod("p", 1, 10, []ctr{{name: "x", units: 2}, {name: "y", units: 2}},
					app(gpushare.CardUnits{0: 2}, gpushare.CardUnits{1: 2})),
			},
			steps: []step{
				{units: 2, wantEnv: env("4", "2", 0), wantPods: map[string][2]string{"p": {"app/0", "false"}}},
				{units: 2, wantEnv: env("4", "2", 1), wantPods: map[string][2]string{"p": {"app/0,app/1", "true"}}},
				{units: 2, wantCode: codes.NotFound},
			},
		},
		{
			// Init containers are allocated before app containers.
			name: "init container then app container",
			spec: "t4:2",
			pods: []runtime.Object{
				makePod("p", 1, 10, []ctr{{name: "app", units: 2}, {name: "setup", units: 3, init: true}},
					gpushare.PodAllocation{
						App:  gpushare.Allocation{0: {1: 2}},
						Init: gpushare.Allocation{0: {0: 3}},
					}),
			},
			steps: []step{
				{units: 3, wantEnv: env("3", "3", 0), wantPods: map[string][2]string{"p": {"init/0", "false"}}},
				{units: 2, wantEnv: env("3", "2", 1), wantPods: map[string][2]string{"p": {"app/0,init/0", "true"}}},
			},
		},
		{
			name: "container on two cards sees both UUIDs",
			spec: "t4:2",
			pods: []runtime.Object{
				makePod("p", 1, 10, []ctr{{name: "big", units: 8, cards: 2}}, app(gpushare.CardUnits{0: 4, 1: 4})),
			},
			steps: []step{
				{units: 8, wantEnv: env("8", "8", 0, 1), wantPods: map[string][2]string{"p": {"app/0", "true"}}},
			},
		},
		{
			name: "no pod requests that size",
			spec: "t4",
			pods: []runtime.Object{makePod("p", 1, 10, four, app(gpushare.CardUnits{0: 4}))},
			steps: []step{
				{units: 3, wantCode: codes.NotFound, wantPods: map[string][2]string{"p": {"", "false"}}},
			},
		},
		{
			name:  "no gpushare pod at all",
			spec:  "t4",
			steps: []step{{units: 1, wantCode: codes.NotFound}},
		},
		{
			// An allocation naming a card the node lacks is no allocation: the plugin places
			// the pod itself on the room left.
			name: "annotation names a card the node lacks",
			spec: "t4",
			pods: []runtime.Object{makePod("p", 1, 10, four, app(gpushare.CardUnits{3: 4}))},
			steps: []step{
				{units: 4, wantEnv: env("4", "4", 0), wantPods: map[string][2]string{"p": {"app/0", "true"}}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, tc.spec, tc.pods...)
			for i, s := range tc.steps {
				got, err := e.allocate(t, s.units)
				if s.wantCode != codes.OK {
					if status.Code(err) != s.wantCode || got != nil {
						t.Fatalf("step %d: Allocate(%d) = %v, %v; want no env and code %v", i, s.units, got, err, s.wantCode)
					}
					if !strings.Contains(err.Error(), "gpushare:") {
						t.Errorf("step %d: error %q does not say it comes from gpushare", i, err)
					}
				} else if err != nil {
					t.Fatalf("step %d: Allocate(%d): %v", i, s.units, err)
				}
				if diff := cmp.Diff(s.wantEnv, got); diff != "" {
					t.Errorf("step %d: Allocate(%d) env (-want,+got):\n%s", i, s.units, diff)
				}
				for pod, want := range s.wantPods {
					ann := e.podAnnotations(t, pod)
					got := [2]string{ann[gpushare.AnnotationAllocated], ann[gpushare.AnnotationAssigned]}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("step %d: pod %s {allocated, assigned} (-want,+got):\n%s", i, pod, diff)
					}
				}
			}
		})
	}
}

func TestGetPreferredAllocationPicksTheChosenCard(t *testing.T) {
	e := newTestEnv(t, "t4:2", makePod("p", 1, 10, []ctr{{name: "m", units: 3}}, app(gpushare.CardUnits{1: 3})))
	avail := availableIDs(2, 14)
	resp, err := e.plugin.GetPreferredAllocation(context.Background(), &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{AvailableDeviceIDs: avail, AllocationSize: 3}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{gpushare.FakeDeviceID(uuid(1), 0), gpushare.FakeDeviceID(uuid(1), 1), gpushare.FakeDeviceID(uuid(1), 10)}
	if diff := cmp.Diff(want, resp.ContainerResponses[0].DeviceIDs); diff != "" {
		t.Errorf("preferred IDs (-want,+got):\n%s", diff)
	}
	// A size no pod asks for still gets an answer of the right length.
	resp, err = e.plugin.GetPreferredAllocation(context.Background(), &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{AvailableDeviceIDs: avail, AllocationSize: 5}},
	})
	if err != nil || len(resp.ContainerResponses[0].DeviceIDs) != 5 {
		t.Errorf("unmatched size: got %v, %v; want 5 IDs", resp, err)
	}
}

// With an informer that never sees the plugin's pod patches, back-to-back Allocates must
// still serve different containers (and pods): the plugin's own ledger decides.
func TestAllocateDoesNotWaitForTheInformer(t *testing.T) {
	pods := []runtime.Object{
		makePod("p", 1, 10, []ctr{{name: "x", units: 2}, {name: "y", units: 2}}, app(gpushare.CardUnits{0: 2}, gpushare.CardUnits{1: 2})),
		makePod("q", 2, 11, []ctr{{name: "z", units: 2}}, app(gpushare.CardUnits{1: 2})),
	}
	e := newTestEnv(t, "t4:2", pods...)
	stale := fake.NewClientset(pods...)
	factory := informers.NewSharedInformerFactory(stale, 0)
	inf := factory.Core().V1().Pods().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	e.plugin.pods = inf

	var got []string
	for i := 0; i < 3; i++ {
		env, err := e.allocate(t, 2)
		if err != nil {
			t.Fatalf("Allocate #%d: %v", i, err)
		}
		got = append(got, env[gpushare.EnvIndex])
	}
	// p/x on card 0, p/y on card 1, then q/z on card 1.
	if diff := cmp.Diff([]string{"0", "1", "1"}, got); diff != "" {
		t.Errorf("cards of three Allocates (-want,+got):\n%s", diff)
	}
	if _, err := e.allocate(t, 2); status.Code(err) != codes.NotFound {
		t.Errorf("fourth Allocate: %v, want NotFound (every container served)", err)
	}
	for _, name := range []string{"p", "q"} {
		if a := e.podAnnotations(t, name)[gpushare.AnnotationAssigned]; a != "true" {
			t.Errorf("pod %s ASSIGNED = %q, want true", name, a)
		}
	}
}
