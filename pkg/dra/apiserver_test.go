package dra

import (
	"context"
	"errors"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// resourceV1 is the resource.k8s.io/v1 discovery of an API server serving ResourceSlices.
func resourceV1(names ...string) []*metav1.APIResourceList {
	l := &metav1.APIResourceList{GroupVersion: resourceSliceGroupVersion}
	for _, n := range names {
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: n})
	}
	return []*metav1.APIResourceList{l}
}

// fakeAPIServer makes client's discovery report gitVersion and resources.
func fakeAPIServer(client *fake.Clientset, gitVersion string, resources []*metav1.APIResourceList) {
	disc := client.Discovery().(*fakediscovery.FakeDiscovery)
	disc.FakedServerVersion = &version.Info{GitVersion: gitVersion}
	disc.Resources = resources
}

// echoDryRunSlices answers dry-run creates of ResourceSlices with the slice sent, changed by
// edit, as an API server does, without storing it.
func echoDryRunSlices(client *fake.Clientset, edit func(*resourceapi.ResourceSlice)) {
	client.PrependReactor("create", "resourceslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c := a.(k8stesting.CreateActionImpl)
		if len(c.CreateOptions.DryRun) == 0 {
			return false, nil, nil
		}
		s := c.GetObject().(*resourceapi.ResourceSlice).DeepCopy()
		s.Name = s.GenerateName + "x"
		edit(s)
		return true, s, nil
	})
}

func TestCheckAPIServer(t *testing.T) {
	tests := []struct {
		name       string
		version    string
		resources  []*metav1.APIResourceList
		versionErr error
		wantErr    string
	}{
		{name: "1.36", version: "v1.36.3", resources: resourceV1("resourceslices", "resourceclaims")},
		{name: "1.37 with a vendor suffix", version: "v1.37.2-gke.1100", resources: resourceV1("resourceslices")},
		{name: "1.35 refused", version: "v1.35.4", resources: resourceV1("resourceslices"),
			wantErr: "needs Kubernetes 1.36 or later (consumable capacity), the API server is v1.35.4: serve this node with --backend=device-plugin"},
		{name: "1.36 prerelease is 1.36", version: "v1.36.0-rc.1", resources: resourceV1("resourceslices")},
		{name: "no resource.k8s.io/v1", version: "v1.36.3", wantErr: "does not serve resource.k8s.io/v1"},
		{name: "no resourceslices", version: "v1.36.3", resources: resourceV1("resourceclaims"), wantErr: "serves no resourceslices"},
		{name: "unreadable version", version: "unknown", resources: resourceV1("resourceslices"), wantErr: `API server's version "unknown"`},
		{name: "version not answered", versionErr: errors.New("connection refused"), wantErr: "reading the API server's version: connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			fakeAPIServer(client, tt.version, tt.resources)
			if tt.versionErr != nil {
				client.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, tt.versionErr
				})
			}
			err := checkAPIServer(context.Background(), client.Discovery())
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("checkAPIServer: %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("checkAPIServer: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestCheckCapacityKept(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*resourceapi.ResourceSlice)
		wantErr string
	}{
		{name: "kept", edit: func(*resourceapi.ResourceSlice) {}},
		{name: "allowMultipleAllocations dropped", edit: func(s *resourceapi.ResourceSlice) {
			s.Spec.Devices[1].AllowMultipleAllocations = nil
		}, wantErr: "device gpu-1: the DRA back end needs consumable capacity"},
		{name: "requestPolicy dropped", edit: func(s *resourceapi.ResourceSlice) {
			c := s.Spec.Devices[0].Capacity["memory"]
			c.RequestPolicy = nil
			s.Spec.Devices[0].Capacity["memory"] = c
		}, wantErr: "device gpu-0"},
	}
	res, err := DriverResources(testNode, testInventory(), nil)
	if err != nil {
		t.Fatal(err)
	}
	devices := res.Pools[testNode].Slices[0].Devices
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			echoDryRunSlices(client, tt.edit)
			err := checkCapacityKept(context.Background(), client, testNode, devices)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("checkCapacityKept: %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("checkCapacityKept: %v, want an error containing %q", err, tt.wantErr)
			}
			if got, _ := client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{}); len(got.Items) != 0 {
				t.Errorf("the dry run stored %d slices", len(got.Items))
			}
		})
	}
}
