package manifests_test

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/gpushare/gpushare/pkg/preflight"
)

// TestRuntimeConfigMounted: deploy/ and the chart let share-plugin read the host's NVIDIA
// runtime configuration where its flag looks (read-only); the chart's path follows its value,
// and an empty value reads nothing.
func TestRuntimeConfigMounted(t *testing.T) {
	const dir = "/etc/nvidia-container-runtime"
	if preflight.DefaultNVIDIAConfigPath != dir+"/config.toml" {
		t.Fatalf("the flag's default %s is not in %s", preflight.DefaultNVIDIAConfigPath, dir)
	}
	if spec := deployDaemonSet(t, "share-plugin/daemonset.yaml").Spec.Template.Spec; !mountsHostPathAs(spec, dir, true) {
		t.Errorf("deploy/share-plugin does not mount the host's %s read-only", dir)
	}
	tests := []struct {
		sets      []string
		wantArg   string
		wantMount string // "": none
	}{
		{nil, "--nvidia-runtime-config=" + dir + "/config.toml", dir},
		{[]string{"sharePlugin.nvidiaRuntimeConfig=/opt/nvidia/ctk/config.toml"}, "--nvidia-runtime-config=/opt/nvidia/ctk/config.toml", "/opt/nvidia/ctk"},
		{[]string{"sharePlugin.nvidiaRuntimeConfig="}, "--nvidia-runtime-config=", ""},
	}
	for _, tt := range tests {
		var ds appsv1.DaemonSet
		render(t, "kube-system", tt.sets).decode(t, "DaemonSet/share-plugin", &ds)
		spec := ds.Spec.Template.Spec
		if !slices.Contains(spec.Containers[0].Args, tt.wantArg) {
			t.Errorf("%v: args %v lack %s", tt.sets, spec.Containers[0].Args, tt.wantArg)
		}
		if tt.wantMount != "" && !mountsHostPathAs(spec, tt.wantMount, true) {
			t.Errorf("%v: the host's %s is not mounted read-only", tt.sets, tt.wantMount)
		}
		for _, v := range spec.Volumes {
			if tt.wantMount == "" && v.Name == "nvidia-runtime-config" {
				t.Errorf("%v: mounts %v", tt.sets, v.HostPath)
			}
		}
	}
}
