package manifests_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// deployDaemonSet reads the one DaemonSet of a deploy/ file.
func deployDaemonSet(t *testing.T, file string) appsv1.DaemonSet {
	t.Helper()
	return deployObject[appsv1.DaemonSet](t, file, "DaemonSet")
}

// deployObject reads the first object of kind in a deploy/ file.
func deployObject[T any](t *testing.T, file, kind string) T {
	t.Helper()
	var out T
	docs, err := docsOf(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if d.kind == kind {
			if err := yaml.UnmarshalStrict(d.raw, &out); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			return out
		}
	}
	t.Fatalf("%s holds no %s", file, kind)
	return out
}

func envOf(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}

func mountAt(c corev1.Container, path string) (corev1.VolumeMount, bool) {
	for _, m := range c.VolumeMounts {
		if m.MountPath == path {
			return m, true
		}
	}
	return corev1.VolumeMount{}, false
}

// TestMPSDaemon: deploy/mps runs gpushare-mps, copied by an init container from the
// share-plugin image, in NVIDIA's CUDA base image pinned by tag on the nodes labelled
// gpushare.io/isolation=mps, with the node's PIDs and the MPS root where share-plugin writes
// its wants (share-plugin's DaemonSet mounts the same folder, writable, and passes it as
// --mps-root); it is never rolled on its own (a restart ends every MPS context of the node).
func TestMPSDaemon(t *testing.T) {
	ds := deployDaemonSet(t, "mps/daemonset.yaml")
	spec := ds.Spec.Template.Spec
	if got := spec.NodeSelector; !cmp.Equal(got, map[string]string{gpushare.LabelIsolation: string(gpushare.IsolationMPS)}) {
		t.Errorf("nodeSelector %v, want only %s=%s", got, gpushare.LabelIsolation, gpushare.IsolationMPS)
	}
	if !spec.HostPID {
		t.Error("the MPS daemon does not run with the node's PIDs")
	}
	if ds.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
		t.Errorf("update strategy %q, want OnDelete", ds.Spec.UpdateStrategy.Type)
	}
	if len(spec.InitContainers) != 1 || !slices.Equal(spec.InitContainers[0].Command, []string{"/usr/bin/gpushare-mps", "install", "/opt/gpushare"}) ||
		!strings.HasPrefix(spec.InitContainers[0].Image, "gpushare/share-plugin:") {
		t.Errorf("init containers %+v, want gpushare-mps installed from the share-plugin image", spec.InitContainers)
	}
	c := spec.Containers[0]
	name, tag, ok := strings.Cut(c.Image, ":")
	if !ok || tag == "" || tag == "latest" || name != "nvcr.io/nvidia/cuda" || !strings.Contains(tag, "-base-") {
		t.Errorf("image %s, want NVIDIA's CUDA base image pinned by tag", c.Image)
	}
	if !strings.Contains(envOf(c)["NVIDIA_DRIVER_CAPABILITIES"], "compute") {
		t.Errorf("env %v: want the compute capability (the driver's MPS binaries)", envOf(c))
	}
	if m, ok := mountAt(c, gpushare.DefaultMPSRoot); !ok || m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationBidirectional {
		t.Errorf("MPS root mount %+v, want %s with Bidirectional propagation (the shm tmpfs must reach the host)", m, gpushare.DefaultMPSRoot)
	}
	if !slices.Equal(c.Command, []string{"/opt/gpushare/gpushare-mps"}) || !slices.Contains(c.Args, "--root="+gpushare.DefaultMPSRoot) {
		t.Errorf("command %v args %v, want gpushare-mps --root=%s", c.Command, c.Args, gpushare.DefaultMPSRoot)
	}
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Error("gpushare-mps is not privileged: it mounts each daemon's shm for the host to see")
	}

	sp := deployDaemonSet(t, "share-plugin/daemonset.yaml").Spec.Template.Spec.Containers[0]
	if !slices.Contains(sp.Args, "--mps-root="+gpushare.DefaultMPSRoot) {
		t.Errorf("share-plugin args %v lack --mps-root=%s", sp.Args, gpushare.DefaultMPSRoot)
	}
	if m, ok := mountAt(sp, gpushare.DefaultMPSRoot); !ok || m.ReadOnly {
		t.Errorf("share-plugin does not mount %s writable (it writes the wants): %+v", gpushare.DefaultMPSRoot, m)
	}
}

// TestChartMPS: mps.enabled renders deploy/mps's DaemonSet (same pod spec); off by default; mps.root moves the daemon's and share-plugin's folder together.
func TestChartMPS(t *testing.T) {
	if _, ok := render(t, "kube-system", nil)["DaemonSet/gpushare-mps"]; ok {
		t.Error("the MPS daemon is rendered by default")
	}
	c := render(t, "kube-system", []string{"mps.enabled=true"})
	var ds appsv1.DaemonSet
	c.decode(t, "DaemonSet/gpushare-mps", &ds)
	want := deployDaemonSet(t, "mps/daemonset.yaml").Spec.Template.Spec
	if d := cmp.Diff(want, ds.Spec.Template.Spec); d != "" {
		t.Errorf("pod spec: deploy/mps (-) vs chart (+):\n%s", d)
	}
	c = render(t, "kube-system", []string{"mps.enabled=true", "mps.root=/var/run/gpu-mps", "mps.shmSize=128Mi"})
	c.decode(t, "DaemonSet/gpushare-mps", &ds)
	args := ds.Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--root=/var/run/gpu-mps") || !slices.Contains(args, "--shm-size=128Mi") {
		t.Errorf("gpushare-mps args %v ignore mps.root or mps.shmSize", args)
	}
	var sp appsv1.DaemonSet
	c.decode(t, "DaemonSet/share-plugin", &sp)
	spc := sp.Spec.Template.Spec.Containers[0]
	if _, ok := mountAt(spc, "/var/run/gpu-mps"); !ok || !slices.Contains(spc.Args, "--mps-root=/var/run/gpu-mps") {
		t.Errorf("share-plugin does not follow mps.root: args %v", spc.Args)
	}
}
