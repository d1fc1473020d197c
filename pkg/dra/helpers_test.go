package dra

import (
	"path/filepath"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

const testNode = "node-a"

// testInventory is two T4s of 14 GiB units.
func testInventory() gpushare.Inventory {
	return gpushare.Inventory{Unit: gpushare.GiB, Devices: []gpushare.Device{
		{Index: 0, UUID: "GPU-aaaa", Model: "Tesla T4", Units: 14, MemoryMiB: 15079, Healthy: true},
		{Index: 1, UUID: "GPU-bbbb", Model: "Tesla T4", Units: 14, MemoryMiB: 15079, Healthy: true},
	}}
}

// testConfig is a driver on simulated cards with its CDI and data folders in dir.
func testConfig(dir string, unhealthy ...string) DriverConfig {
	cdiDir := filepath.Join(dir, "cdi")
	bad := map[string]bool{}
	for _, u := range unhealthy {
		bad[u] = true
	}
	return DriverConfig{
		NodeName:  testNode,
		Inventory: testInventory(),
		Specs:     nodecards.CardSpecs{Dir: cdiDir, SimulatedCardDir: nodecards.SimulatedCardDir(cdiDir)},
		DataDir:   filepath.Join(dir, "data"),
		Healthy:   func(uuid string) bool { return !bad[uuid] },
	}
}

func newTestDriver(t *testing.T, cfg DriverConfig) *Driver {
	t.Helper()
	d, err := NewDriver(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return d
}

// result is one allocation result of this driver on device of testNode consuming memory
// ("" : no consumedCapacity recorded).
func result(request, device, memory string) resourceapi.DeviceRequestAllocationResult {
	share := types.UID("share-" + request + "-" + device)
	r := resourceapi.DeviceRequestAllocationResult{Request: request, Driver: gpushare.DRADriverName, Pool: testNode, Device: device, ShareID: &share}
	if memory != "" {
		r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{gpushare.DRACapacityMemory: resource.MustParse(memory)}
	}
	return r
}

// claim is an allocated claim with results; uid must be a valid CDI name.
func claim(uid, name string, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID(uid)}}
	if results != nil {
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}
	}
	return c
}
