package scale

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/gpushare/gpushare/internal/bench/objects"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TestResourceSlice: the bench publishes what the DRA back end would for a node of the
// bench's cards: one device per card, named and identified as the node's inventory, with
// its 16 GiB as consumable capacity in steps of one unit.
func TestResourceSlice(t *testing.T) {
	o := DefaultObjects()
	s, err := o.ResourceSlice("scale-node-00007")
	if err != nil {
		t.Fatal(err)
	}
	if s.Spec.Driver != gpushare.DRADriverName || s.Spec.Pool.Name != "scale-node-00007" ||
		s.Spec.NodeName == nil || *s.Spec.NodeName != "scale-node-00007" || s.Spec.Pool.ResourceSliceCount != 1 {
		t.Errorf("slice spec %+v", s.Spec)
	}
	if len(s.Spec.Devices) != 8 {
		t.Fatalf("%d devices, want 8", len(s.Spec.Devices))
	}
	n, err := o.Node("scale-node-00007", false)
	if err != nil {
		t.Fatal(err)
	}
	inv, _, err := o.Resources.NodeInventory(n)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		device int
		want   string // name
	}{{0, "gpu-0"}, {7, "gpu-7"}}
	for _, tc := range tests {
		d := s.Spec.Devices[tc.device]
		if d.Name != tc.want {
			t.Errorf("device %d named %q, want %q", tc.device, d.Name, tc.want)
		}
		if uuid := d.Attributes[gpushare.DRAAttributeUUID].StringValue; uuid == nil || *uuid != inv.Devices[tc.device].UUID {
			t.Errorf("device %d uuid %v, want the node's %s", tc.device, uuid, inv.Devices[tc.device].UUID)
		}
		c := d.Capacity[gpushare.DRACapacityMemory]
		if c.Value.Cmp(resource.MustParse("16Gi")) != 0 || c.RequestPolicy.ValidRange.Step.Cmp(resource.MustParse("1Gi")) != 0 {
			t.Errorf("device %d memory %s step %s, want 16Gi step 1Gi", tc.device, c.Value.String(), c.RequestPolicy.ValidRange.Step.String())
		}
		if d.AllowMultipleAllocations == nil || !*d.AllowMultipleAllocations {
			t.Errorf("device %d does not allow multiple allocations", tc.device)
		}
	}
}

func TestClaim(t *testing.T) {
	o := DefaultObjects()
	uuid := resourceapi.FullyQualifiedName(gpushare.DRADriverName + "/" + gpushare.DRAAttributeUUID)
	tests := []struct {
		name         string
		shape        PodShape
		wantCount    int64
		wantPerCard  string
		wantDistinct bool
	}{
		{"one card", PodShape{Units: 5, Cards: 1}, 1, "5Gi", false},
		{"two cards share the units", PodShape{Units: 12, Cards: 2}, 2, "6Gi", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := o.Claim("dra", 3, tc.shape)
			if c.Name != "dra-00003" || c.Namespace != DefaultNamespace || c.Labels[LabelSet] != "dra" {
				t.Errorf("claim identity %s/%s labels %v", c.Namespace, c.Name, c.Labels)
			}
			reqs := c.Spec.Devices.Requests
			if len(reqs) != 1 || reqs[0].Exactly == nil {
				t.Fatalf("requests %+v, want one exact request", reqs)
			}
			e := reqs[0].Exactly
			if e.DeviceClassName != gpushare.DRADriverName || e.Count != tc.wantCount || e.AllocationMode != resourceapi.DeviceAllocationModeExactCount {
				t.Errorf("request class %q count %d mode %q", e.DeviceClassName, e.Count, e.AllocationMode)
			}
			mem := e.Capacity.Requests[gpushare.DRACapacityMemory]
			if mem.Cmp(resource.MustParse(tc.wantPerCard)) != 0 {
				t.Errorf("memory per card %s, want %s", mem.String(), tc.wantPerCard)
			}
			var want []resourceapi.DeviceConstraint
			if tc.wantDistinct {
				want = []resourceapi.DeviceConstraint{{Requests: []string{draRequest}, DistinctAttribute: &uuid}}
			}
			if diff := cmp.Diff(want, c.Spec.Devices.Constraints); diff != "" {
				t.Errorf("constraints (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestDRAPod: the pod names its claim and asks for no gpu-mem, so only the DRA path can
// place it.
func TestDRAPod(t *testing.T) {
	o := DefaultObjects()
	p := o.DRAPod("dra", 4, PodShape{Units: 10, Cards: 2})
	if p.Name != "dra-00004" || p.Labels[LabelSet] != "dra" {
		t.Errorf("pod identity %s labels %v", p.Name, p.Labels)
	}
	if len(p.Spec.ResourceClaims) != 1 || *p.Spec.ResourceClaims[0].ResourceClaimName != "dra-00004" {
		t.Errorf("resourceClaims %+v, want the claim dra-00004", p.Spec.ResourceClaims)
	}
	c := p.Spec.Containers[0].Resources
	if len(c.Claims) != 1 || c.Claims[0].Name != p.Spec.ResourceClaims[0].Name {
		t.Errorf("container claims %+v do not name the pod's claim", c.Claims)
	}
	if _, ok := c.Limits[o.Resources.Mem]; ok {
		t.Errorf("DRA pod asks for %s too: %v", o.Resources.Mem, c.Limits)
	}
}

// TestDeviceClass: the bench's DeviceClass is deploy/dra's.
func TestDeviceClass(t *testing.T) {
	b, err := os.ReadFile("../../../deploy/dra/deviceclass.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want resourceapi.DeviceClass
	if err := yaml.UnmarshalStrict(b, &want); err != nil {
		t.Fatal(err)
	}
	got := objects.DeviceClass()
	if got.Name != want.Name {
		t.Errorf("name %q, want %q", got.Name, want.Name)
	}
	if diff := cmp.Diff(want.Spec, got.Spec); diff != "" {
		t.Errorf("spec (-deploy/dra,+bench):\n%s", diff)
	}
}
