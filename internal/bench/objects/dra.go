package objects

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// DeviceClass is deploy/dra/deviceclass.yaml: every device of the DRA back end's driver.
func DeviceClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: gpushare.DRADriverName},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", gpushare.DRADriverName)},
		}}},
	}
}

// MemoryClaimSpec is a claim of the DeviceClass: one request named request for cards
// devices (at least one), each consuming perCardBytes of their memory capacity, on cards of
// distinct UUID when there are several (distinctAttribute), as deploy/examples' two-card
// claim asks.
func MemoryClaimSpec(request string, cards int64, perCardBytes int64) resourceapi.ResourceClaimSpec {
	spec := resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
		Requests: []resourceapi.DeviceRequest{{
			Name: request,
			Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: gpushare.DRADriverName,
				AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
				Count:           max(cards, 1),
				Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
					gpushare.DRACapacityMemory: *resource.NewQuantity(perCardBytes, resource.BinarySI),
				}},
			},
		}},
	}}
	if cards > 1 {
		spec.Devices.Constraints = []resourceapi.DeviceConstraint{{
			Requests:          []string{request},
			DistinctAttribute: ptr.To(resourceapi.FullyQualifiedName(gpushare.DRADriverName + "/" + gpushare.DRAAttributeUUID)),
		}}
	}
	return spec
}
