package dra

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// minKubernetes is the oldest API server the DRA back end serves: consumable capacity (one
// card allocated to many claims, each consuming part of its memory) is beta and on by
// default from 1.36. An older server drops allowMultipleAllocations and requestPolicy from
// the published slice, and every claim would then take a whole card.
func minKubernetes() *version.Version { return version.MajorMinor(1, 36) }

// resourceSliceGroupVersion is the API the plugin publishes its ResourceSlices through.
const resourceSliceGroupVersion = "resource.k8s.io/v1"

// checkAPIServer refuses an API server older than minKubernetes or one that does not serve
// resource.k8s.io/v1 ResourceSlices. The error names the server's version and the
// device-plugin back end, which runs on any version.
func checkAPIServer(ctx context.Context, disc discovery.DiscoveryInterface) error {
	dc := discovery.ToDiscoveryInterfaceWithContext(disc)
	info, err := dc.ServerVersionWithContext(ctx)
	if err != nil {
		return fmt.Errorf("reading the API server's version: %w", err)
	}
	v, err := version.ParseGeneric(info.GitVersion)
	if err != nil {
		return fmt.Errorf("reading the API server's version %q: %w", info.GitVersion, err)
	}
	if !v.AtLeast(minKubernetes()) {
		return fmt.Errorf("the DRA back end needs Kubernetes %s or later (consumable capacity), the API server is %s: "+
			"serve this node with --backend=%s (node label %s=%s)",
			minKubernetes(), info.GitVersion, gpushare.BackendDevicePlugin, gpushare.LabelBackend, gpushare.BackendDevicePlugin)
	}
	list, err := dc.ServerResourcesForGroupVersionWithContext(ctx, resourceSliceGroupVersion)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("the API server (%s) does not serve %s: the DRA back end needs Dynamic Resource Allocation", info.GitVersion, resourceSliceGroupVersion)
	}
	if err != nil {
		return fmt.Errorf("reading the API server's %s resources: %w", resourceSliceGroupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Name == "resourceslices" {
			return nil
		}
	}
	return fmt.Errorf("the API server (%s) serves no resourceslices in %s", info.GitVersion, resourceSliceGroupVersion)
}

// checkCapacityKept creates, as a dry run, a slice of node holding devices and refuses when
// the API server returns it without what sharing a card needs: allowMultipleAllocations and
// the memory capacity's requestPolicy. A server whose consumable capacity is turned off
// drops both without an error.
func checkCapacityKept(ctx context.Context, client kubernetes.Interface, node string, devices []resourceapi.Device) error {
	probe := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{GenerateName: node + "-" + gpushare.DRADriverName + "-probe-"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   gpushare.DRADriverName,
			Pool:     resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			NodeName: &node,
			Devices:  devices,
		},
	}
	got, err := client.ResourceV1().ResourceSlices().Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return fmt.Errorf("checking the node's ResourceSlice with a dry-run create: %w", err)
	}
	for _, d := range got.Spec.Devices {
		c, ok := d.Capacity[gpushare.DRACapacityMemory]
		if d.AllowMultipleAllocations == nil || !*d.AllowMultipleAllocations || !ok || c.RequestPolicy == nil {
			return fmt.Errorf("the API server drops allowMultipleAllocations or the memory requestPolicy of device %s: "+
				"the DRA back end needs consumable capacity (feature gate DRAConsumableCapacity, on by default from Kubernetes %s)",
				d.Name, minKubernetes())
		}
	}
	return nil
}
