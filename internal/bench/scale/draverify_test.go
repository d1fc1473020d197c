package scale

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// allocated is claim i of set "dra" with shape s as the scheduler leaves it: allocated on
// cards of node (one per device asked, each consuming gib GiB) and reserved for its pod.
type allocated struct {
	i     int
	shape PodShape
	node  string
	cards []string
	gib   int64
}

func draFixture(o Objects, a allocated) (*corev1.Pod, *resourceapi.ResourceClaim) {
	p := o.DRAPod("dra", a.i, a.shape)
	p.UID = types.UID(p.Name)
	p.Spec.NodeName = a.node
	c := o.Claim("dra", a.i, a.shape)
	if a.node == "" {
		return p, c
	}
	alloc := &resourceapi.AllocationResult{}
	for _, card := range a.cards {
		alloc.Devices.Results = append(alloc.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: draRequest, Driver: gpushare.DRADriverName, Pool: a.node, Device: card,
			ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{
				gpushare.DRACapacityMemory: *resource.NewQuantity(a.gib<<30, resource.BinarySI),
			},
		})
	}
	c.Status.Allocation = alloc
	c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: p.Name, UID: p.UID}}
	return p, c
}

func TestCheckClaims(t *testing.T) {
	o := DefaultObjects()
	one := func(units int64) PodShape { return PodShape{Units: units, Cards: 1} }
	two := func(units int64) PodShape { return PodShape{Units: units, Cards: 2} }
	tests := []struct {
		name            string
		allocs          []allocated
		edit            func(pods []*corev1.Pod, claims map[string]*resourceapi.ResourceClaim)
		wantOver        []string
		wantUnallocated []string
		wantMismatched  []string
		wantClaims      int
		wantNodes       int
	}{
		{
			name: "full card is fine",
			allocs: []allocated{
				{0, one(10), "a", []string{"gpu-0"}, 10},
				{1, one(6), "a", []string{"gpu-0"}, 6},
				{2, two(16), "a", []string{"gpu-1", "gpu-2"}, 8},
			},
			wantClaims: 3,
			wantNodes:  1,
		},
		{
			name: "one unit over",
			allocs: []allocated{
				{0, one(10), "a", []string{"gpu-1"}, 10},
				{1, two(14), "a", []string{"gpu-1", "gpu-3"}, 7},
				{2, one(16), "b", []string{"gpu-1"}, 16},
			},
			wantOver:   []string{"a/gpu-1: 17 > 16"},
			wantClaims: 3,
			wantNodes:  2,
		},
		{
			name:       "unbound pods are skipped",
			allocs:     []allocated{{0, one(4), "", nil, 0}},
			wantClaims: 0,
			wantNodes:  0,
		},
		{
			name:   "missing, unallocated and unreserved claims",
			allocs: []allocated{{0, one(4), "a", []string{"gpu-0"}, 4}, {1, one(4), "a", []string{"gpu-0"}, 4}, {2, one(4), "a", []string{"gpu-0"}, 4}},
			edit: func(_ []*corev1.Pod, claims map[string]*resourceapi.ResourceClaim) {
				delete(claims, DefaultNamespace+"/dra-00000")
				claims[DefaultNamespace+"/dra-00001"].Status.Allocation = nil
				claims[DefaultNamespace+"/dra-00002"].Status.ReservedFor[0].UID = "someone-else"
			},
			wantUnallocated: []string{"dra-00000", "dra-00001", "dra-00002"},
			wantClaims:      3,
			wantNodes:       0,
		},
		{
			name: "allocations unlike the request",
			allocs: []allocated{
				{0, two(8), "a", []string{"gpu-0", "gpu-0"}, 4},
				{1, two(8), "a", []string{"gpu-0"}, 4},
				{2, one(4), "a", []string{"gpu-1"}, 5},
				{3, one(4), "a", []string{"gpu-2"}, 4},
			},
			edit: func(pods []*corev1.Pod, _ map[string]*resourceapi.ResourceClaim) {
				pods[3].Spec.NodeName = "b" // the claim's card is on a
			},
			wantOver: []string{},
			wantMismatched: []string{
				"dra-00000: device gpu-0 twice",
				"dra-00001: 1 devices, asked 2",
				"dra-00002: device gpu-1 consumes 5Gi, asked 4294967296 bytes",
				"dra-00003: device a/gpu-2 is not on node b",
			},
			wantClaims: 4,
			wantNodes:  1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var pods []*corev1.Pod
			claims := map[string]*resourceapi.ResourceClaim{}
			for _, a := range tc.allocs {
				p, c := draFixture(o, a)
				pods = append(pods, p)
				claims[c.Namespace+"/"+c.Name] = c
			}
			if tc.edit != nil {
				tc.edit(pods, claims)
			}
			got := checkClaims(pods, claims, o.CardUnits<<30)
			want := ClaimCheck{Claims: tc.wantClaims, Nodes: tc.wantNodes, Over: orEmpty(tc.wantOver), Unallocated: orEmpty(tc.wantUnallocated), Mismatched: orEmpty(tc.wantMismatched)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("checkClaims (-want,+got):\n%s", diff)
			}
			if got.OK() != (len(tc.wantOver)+len(tc.wantUnallocated)+len(tc.wantMismatched) == 0) {
				t.Errorf("OK() = %v", got.OK())
			}
		})
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
