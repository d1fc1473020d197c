package inspect

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	kptr "k8s.io/utils/ptr"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

const gib = int64(1) << 30

// draDevice is a card device as share-plugin --backend=dra publishes it: capacity gib×units
// bytes, request-policy step stepBytes.
func draDevice(index int, uuid string, units, stepBytes int64, tainted bool) resourceapi.Device {
	d := resourceapi.Device{
		Name: "gpu-" + itoa(index),
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			gpushare.DRAAttributeUUID:        {StringValue: kptr.To(uuid)},
			gpushare.DRAAttributeIndex:       {IntValue: kptr.To(int64(index))},
			gpushare.DRAAttributeProductName: {StringValue: kptr.To("Tesla T4")},
		},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			gpushare.DRACapacityMemory: {
				Value: *resource.NewQuantity(units*stepBytes, resource.BinarySI),
				RequestPolicy: &resourceapi.CapacityRequestPolicy{ValidRange: &resourceapi.CapacityRequestPolicyRange{
					Min: resource.NewQuantity(stepBytes, resource.BinarySI), Step: resource.NewQuantity(stepBytes, resource.BinarySI),
				}},
			},
		},
		AllowMultipleAllocations: kptr.To(true),
	}
	if tainted {
		d.Taints = []resourceapi.DeviceTaint{{Key: gpushare.DRATaintUnhealthy, Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	}
	return d
}

// informational gives d a taint of effect None, which only informs: d stays healthy.
func informational(d resourceapi.Device) resourceapi.Device {
	d.Taints = []resourceapi.DeviceTaint{{Key: "example.com/note", Effect: resourceapi.DeviceTaintEffectNone}}
	return d
}

// partUnits gives d a memory capacity of a T4's 15079 MiB, not whole GiB units.
func partUnits(d resourceapi.Device) resourceapi.Device {
	c := d.Capacity[gpushare.DRACapacityMemory]
	c.Value = *resource.NewQuantity(15079<<20, resource.BinarySI)
	d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{gpushare.DRACapacityMemory: c}
	return d
}

func itoa(i int) string { return strconv.Itoa(i) }

// draSlice is node's slice of pool generation gen.
func draSlice(node string, gen int64, devices ...resourceapi.Device) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + gpushare.DRADriverName + "-" + itoa(int(gen))},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: gpushare.DRADriverName, NodeName: kptr.To(node),
			Pool:    resourceapi.ResourcePool{Name: node, Generation: gen, ResourceSliceCount: 1},
			Devices: devices,
		},
	}
}

// draResult is a result of the gpushare driver on pool's device consuming bytes (none when
// bytes is 0).
func draResult(pool, device string, bytes int64) resourceapi.DeviceRequestAllocationResult {
	r := resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: gpushare.DRADriverName, Pool: pool, Device: device}
	if bytes > 0 {
		r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{gpushare.DRACapacityMemory: *resource.NewQuantity(bytes, resource.BinarySI)}
	}
	return r
}

// draClaimObj is claim ns/name, of UID draClaimUID(ns, name), allocated results and reserved
// for pods (none: not allocated when results is empty too).
func draClaimObj(ns, name string, pods []string, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: k8stypes.UID(draClaimUID(ns, name))}}
	if len(results) > 0 {
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}
	}
	for _, p := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p, UID: k8stypes.UID("uid-" + p)})
	}
	return c
}

// draClaimUID is the UID draClaimObj gives claim ns/name.
func draClaimUID(ns, name string) string { return "uid-" + ns + "-" + name }

// draScenario is the reference notebooks as claims on a DRA node: one T4 of 14 GiB units,
// three claims of 4 GiB → 12/14 (85%), each reserved by its notebook pod. A claim not yet
// allocated, a claim of another driver and a stale slice generation must not count. The
// device-plugin node of referenceScenario is unchanged next to it.
func draScenario(t *testing.T) []runtime.Object {
	const node = "gpu-dra"
	objs := append(referenceScenario(t),
		makeNode(node, "10.0.0.20").Label(gpushare.LabelBackend, string(gpushare.BackendDRA)).Obj(),
		draSlice(node, 1, draDevice(0, "GPU-old", 16, gib, false)),
		draSlice(node, 2, draDevice(0, "GPU-8f2c1d3e", 14, gib, false)),
		draSlice("other", 1, draDevice(0, "GPU-other", 14, gib, false)),
	)
	for _, nb := range []string{"tf-notebook-a", "tf-notebook-b", "tf-notebook-c"} {
		objs = append(objs,
			makePod("default", nb).Node(node).Obj(),
			draClaimObj("default", nb+"-gpu", []string{nb}, draResult(node, "gpu-0", 4*gib)))
	}
	other := draClaimObj("default", "other-driver", []string{"x"}, draResult(node, "gpu-0", 4*gib))
	other.Status.Allocation.Devices.Results[0].Driver = "gpu.nvidia.com"
	return append(objs,
		makePod("default", "tf-notebook-d").Obj(),
		draClaimObj("default", "tf-notebook-d-gpu", nil),
		other,
		draClaimObj("default", "elsewhere", []string{"y"}, draResult("other", "gpu-0", 4*gib)),
	)
}

// TestReadDRANode: cards from the newest slices (unit from the request policy's step,
// NoSchedule/NoExecute taints as health), claims per card in units, whole card without
// consumed capacity, a device no slice lists, reservedFor pods, odd records as warnings.
func TestReadDRANode(t *testing.T) {
	const mib256 = int64(256) << 20
	tests := []struct {
		name string
		objs draObjects
		want draNode
	}{{
		name: "no slices",
		want: draNode{Unit: gpushare.GiB},
	}, {
		name: "256MiB unit, two cards, one tainted",
		objs: draObjects{
			Slices: []resourceapi.ResourceSlice{*draSlice("n", 3, draDevice(1, "GPU-b", 56, mib256, true), draDevice(0, "GPU-a", 56, mib256, false))},
			Claims: []resourceapi.ResourceClaim{
				*draClaimObj("ml", "two", []string{"p", "q"}, draResult("n", "gpu-0", 2*gib), draResult("n", "gpu-1", 1280<<20)),
				*draClaimObj("ml", "whole", nil, draResult("n", "gpu-1", 0)),
				*draClaimObj("ml", "ghost", []string{"g"}, draResult("n", "gpu-7", gib)),
				*draClaimObj("ml", "pending", []string{"w"}),
			},
		},
		want: draNode{
			Unit: gpushare.Unit{MiB: 256},
			Cards: []draCard{
				{Device: "gpu-0", Index: 0, UUID: "GPU-a", Model: "Tesla T4", Total: 56, Healthy: true},
				{Device: "gpu-1", Index: 1, UUID: "GPU-b", Model: "Tesla T4", Total: 56},
			},
			Claims: []draClaim{
				{Namespace: "ml", Name: "ghost", UID: "uid-ml-ghost", Pods: []string{"g"}, Cards: gpushare.CardUnits{}, Unknown: []string{"gpu-7"}},
				{Namespace: "ml", Name: "two", UID: "uid-ml-two", Pods: []string{"p", "q"}, Cards: gpushare.CardUnits{0: 8, 1: 5}},
				{Namespace: "ml", Name: "whole", UID: "uid-ml-whole", Cards: gpushare.CardUnits{1: 56}},
			},
		},
	}, {
		name: "odd records: an informational taint, a device of part units, part-unit consumed memory",
		objs: draObjects{
			Slices: []resourceapi.ResourceSlice{*draSlice("n", 1, informational(draDevice(0, "GPU-a", 14, gib, false)), partUnits(draDevice(1, "GPU-b", 14, gib, false)))},
			Claims: []resourceapi.ResourceClaim{
				*draClaimObj("ml", "half", []string{"h"}, draResult("n", "gpu-0", 1536<<20)),
				*draClaimObj("ml", "on-odd", []string{"o"}, draResult("n", "gpu-1", gib)),
			},
		},
		want: draNode{
			Unit:  gpushare.GiB,
			Cards: []draCard{{Device: "gpu-0", Index: 0, UUID: "GPU-a", Model: "Tesla T4", Total: 14, Healthy: true}},
			Claims: []draClaim{{Namespace: "ml", Name: "half", UID: "uid-ml-half", Pods: []string{"h"}, Cards: gpushare.CardUnits{0: 14},
				Odd: []string{"device gpu-0: consumed memory: 1536Mi is not a positive whole number of GiB units"}}},
			Warnings: []string{"node n: slice n-gpu-mem.gpushare.io-1: device gpu-1: memory capacity: 15079Mi is not a positive whole number of GiB units (not counted as a card)"},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := readDRANode("n", tc.objs)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(draCard{})); diff != "" {
				t.Errorf("readDRANode (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestClaimProblems: --check's comparison of claims with the ResourceSlices of a DRA node.
func TestClaimProblems(t *testing.T) {
	card := []draCard{{Device: "gpu-0", Index: 0, Total: 14, Healthy: true}}
	tests := []struct {
		name string
		node draNode
		want []string
	}{{
		name: "claims fit",
		node: draNode{Cards: card, Claims: []draClaim{{Namespace: "d", Name: "a", Cards: gpushare.CardUnits{0: 4}}, {Namespace: "d", Name: "b", Cards: gpushare.CardUnits{0: 10}}}},
	}, {
		name: "card over capacity",
		node: draNode{Cards: card, Claims: []draClaim{{Namespace: "d", Name: "a", Cards: gpushare.CardUnits{0: 8}}, {Namespace: "d", Name: "b", Cards: gpushare.CardUnits{0: 8}}}},
		want: []string{"claim-overcommitted: node n card 0: claims consume 16 units, ResourceSlice capacity 14 (d/a 8, d/b 8)"},
	}, {
		name: "device no slice lists",
		node: draNode{Cards: card, Claims: []draClaim{{Namespace: "d", Name: "a", Cards: gpushare.CardUnits{}, Unknown: []string{"gpu-3"}}}},
		want: []string{"claim-unknown-device: node n: claim d/a holds device gpu-3, which the node's ResourceSlices do not list"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := compareViews(checkViews{DRA: map[string]draNode{"n": tc.node}})
			var got []string
			for _, p := range r.Problems {
				got = append(got, p.Kind+": "+p.Line)
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
