package schedulerplugin

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/dra"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

// fakeDRA is the scheduler's DRA manager over fixed slices and claims; err, when set, is
// what its listers return; inFlight are the allocations its tracker holds pending, by
// claim UID; byName, when set, holds the claims by name, for Get at the tracker's speed.
type fakeDRA struct {
	slices   []*resourceapi.ResourceSlice
	claims   []*resourceapi.ResourceClaim
	inFlight map[types.UID]*resourceapi.AllocationResult
	byName   map[types.NamespacedName]*resourceapi.ResourceClaim
	err      error
}

func (f *fakeDRA) ResourceClaims() fwk.ResourceClaimTracker     { return fakeClaims{f: f} }
func (f *fakeDRA) ResourceSlices() fwk.ResourceSliceLister      { return f }
func (f *fakeDRA) DeviceClasses() fwk.DeviceClassLister         { return nil }
func (f *fakeDRA) DeviceClassResolver() fwk.DeviceClassResolver { return nil }
func (f *fakeDRA) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	return f.slices, f.err
}

// fakeClaims is the claim tracker's List, Get and GetPendingAllocation.
type fakeClaims struct {
	fwk.ResourceClaimTracker
	f *fakeDRA
}

func (c fakeClaims) List() ([]*resourceapi.ResourceClaim, error) { return c.f.claims, c.f.err }

func (c fakeClaims) Get(namespace, name string) (*resourceapi.ResourceClaim, error) {
	if c.f.err != nil {
		return nil, c.f.err
	}
	if c.f.byName != nil {
		if cl := c.f.byName[types.NamespacedName{Namespace: namespace, Name: name}]; cl != nil {
			return cl, nil
		}
		return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), name)
	}
	for _, cl := range c.f.claims {
		if cl.Namespace == namespace && cl.Name == name {
			return cl, nil
		}
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), name)
}

func (c fakeClaims) GetPendingAllocation(uid types.UID) *resourceapi.AllocationResult {
	return c.f.inFlight[uid]
}

var errTracker = errors.New("tracker broken")

// draSlice is the ResourceSlice the DRA plugin publishes for node with one card of each
// units (unit: 0 is GiB), card i unhealthy where sick[i].
func draSlice(t testing.TB, node string, unit gpushare.Unit, units []int64, sick ...int) *resourceapi.ResourceSlice {
	t.Helper()
	inv := gpushare.Inventory{Unit: unit}
	for i, u := range units {
		inv.Devices = append(inv.Devices, gpushare.Device{Index: i, UUID: "GPU-" + node + "-" + dra.DeviceName(i), Model: "Tesla T4", Units: u, Healthy: true})
	}
	for _, i := range sick {
		inv.Devices[i].Healthy = false
	}
	res, err := dra.DriverResources(node, inv, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + gpushare.DRADriverName},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   gpushare.DRADriverName,
			Pool:     resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(node),
			Devices:  res.Pools[node].Slices[0].Devices,
		},
	}
}

// held is one allocation result of the gpushare driver: memory consumed on pool's device
// ("" memory: a result without consumed capacity).
type held struct {
	pool, device, memory string
}

// allocated is a claim allocated with results.
func allocated(name string, results ...held) *resourceapi.ResourceClaim {
	cl := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}}
	cl.Status.Allocation = &resourceapi.AllocationResult{}
	for _, h := range results {
		r := resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: gpushare.DRADriverName, Pool: h.pool, Device: h.device}
		if h.memory != "" {
			r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{gpushare.DRACapacityMemory: resource.MustParse(h.memory)}
		}
		cl.Status.Allocation.Devices.Results = append(cl.Status.Allocation.Devices.Results, r)
	}
	return cl
}

// pending is an unallocated claim with one request per ask.
func pending(name string, asks ...resourceapi.ExactDeviceRequest) *resourceapi.ResourceClaim {
	cl := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}}
	for i, a := range asks {
		cl.Spec.Devices.Requests = append(cl.Spec.Devices.Requests, resourceapi.DeviceRequest{Name: "r" + string(rune('0'+i)), Exactly: &a})
	}
	return cl
}

// ask is a request of the gpushare class for count cards with memory each ("": no capacity
// request).
func ask(memory string, count int64) resourceapi.ExactDeviceRequest {
	r := resourceapi.ExactDeviceRequest{DeviceClassName: gpushare.DRADriverName, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}
	if memory != "" {
		r.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{gpushare.DRACapacityMemory: resource.MustParse(memory)}}
	}
	return r
}

// claimPod is a pod without gpu-mem whose claim entries name the claims (the first one
// through a template, generated under its own name, the others directly).
func claimPod(name string, claims ...string) *v1.Pod {
	p := ct.Pod(name, 0)
	for i, cl := range claims {
		pc := v1.PodResourceClaim{Name: "c" + string(rune('0'+i))}
		if i == 0 {
			pc.ResourceClaimTemplateName = ptr.To("template")
			p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, v1.PodResourceClaimStatus{Name: pc.Name, ResourceClaimName: ptr.To(cl)})
		} else {
			pc.ResourceClaimName = ptr.To(cl)
		}
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, pc)
		p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, v1.ResourceClaim{Name: pc.Name})
	}
	return p
}
