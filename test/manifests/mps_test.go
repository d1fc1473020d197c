package manifests_test

import (
	"bytes"
	"os"
	"os/exec"
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

// TestMPSDaemon: deploy/mps runs NVIDIA's CUDA base image pinned by tag on the nodes labelled
// gpushare.io/isolation=mps, with the node's PIDs, its entry script from a ConfigMap, and the
// MPS root where share-plugin looks for it (share-plugin's DaemonSet mounts the same folder
// and passes it as --mps-root); the chart carries the same script.
func TestMPSDaemon(t *testing.T) {
	ds := deployDaemonSet(t, "mps/daemonset.yaml")
	spec := ds.Spec.Template.Spec
	if got := spec.NodeSelector; !cmp.Equal(got, map[string]string{gpushare.LabelIsolation: string(gpushare.IsolationMPS)}) {
		t.Errorf("nodeSelector %v, want only %s=%s", got, gpushare.LabelIsolation, gpushare.IsolationMPS)
	}
	if !spec.HostPID {
		t.Error("the MPS daemon does not run with the node's PIDs")
	}
	c := spec.Containers[0]
	name, tag, ok := strings.Cut(c.Image, ":")
	if !ok || tag == "" || tag == "latest" || name != "nvcr.io/nvidia/cuda" || !strings.Contains(tag, "-base-") {
		t.Errorf("image %s, want NVIDIA's CUDA base image pinned by tag", c.Image)
	}
	env := envOf(c)
	if env["GPUSHARE_MPS_ROOT"] != gpushare.DefaultMPSRoot || !strings.Contains(env["NVIDIA_DRIVER_CAPABILITIES"], "compute") {
		t.Errorf("env %v: want GPUSHARE_MPS_ROOT=%s and the compute capability (the driver's MPS binaries)", env, gpushare.DefaultMPSRoot)
	}
	if m, ok := mountAt(c, gpushare.DefaultMPSRoot); !ok || m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationBidirectional {
		t.Errorf("MPS root mount %+v, want %s with Bidirectional propagation (the shm tmpfs must reach the host)", m, gpushare.DefaultMPSRoot)
	}
	if !slices.Equal(c.Command, []string{"/bin/bash", "/opt/gpushare/mps-daemon.sh"}) {
		t.Errorf("command %v", c.Command)
	}

	sp := deployDaemonSet(t, "share-plugin/daemonset.yaml").Spec.Template.Spec.Containers[0]
	if !slices.Contains(sp.Args, "--mps-root="+gpushare.DefaultMPSRoot) {
		t.Errorf("share-plugin args %v lack --mps-root=%s", sp.Args, gpushare.DefaultMPSRoot)
	}
	if m, ok := mountAt(sp, gpushare.DefaultMPSRoot); !ok || !m.ReadOnly {
		t.Errorf("share-plugin does not mount %s read-only: %+v", gpushare.DefaultMPSRoot, m)
	}

	kust, err := os.ReadFile("mps/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"daemonset.yaml", "name: gpushare-mps-daemon", "- mps-daemon.sh", "disableNameSuffixHash: true"} {
		if !strings.Contains(string(kust), want) {
			t.Errorf("mps/kustomization.yaml lacks %q", want)
		}
	}
	script, err := os.ReadFile("mps/mps-daemon.sh")
	if err != nil {
		t.Fatal(err)
	}
	chartScript, err := os.ReadFile(chartDir + "/files/mps-daemon.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(script, chartScript) {
		t.Errorf("%s/files/mps-daemon.sh differs from deploy/mps/mps-daemon.sh: copy it", chartDir)
	}
	// The folders share-plugin mounts and the ready file it checks.
	for _, want := range []string{`"$d/pipe" "$d/log" "$d/shm"`, `touch "$root/$u/ready"`, "nvidia-cuda-mps-control -f", "CUDA_VISIBLE_DEVICES=$u"} {
		if !strings.Contains(string(script), want) {
			t.Errorf("mps-daemon.sh lacks %q", want)
		}
	}
	if out, err := exec.Command("bash", "-n", "mps/mps-daemon.sh").CombinedOutput(); err != nil {
		t.Errorf("bash -n mps-daemon.sh: %v\n%s", err, out)
	}
}

// TestChartMPS: mps.enabled renders deploy/mps's DaemonSet (same pod spec) and the script's
// ConfigMap; off by default; mps.root moves the daemon's and share-plugin's folder together.
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
	var cm corev1.ConfigMap
	c.decode(t, "ConfigMap/gpushare-mps-daemon", &cm)
	script, err := os.ReadFile("mps/mps-daemon.sh")
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["mps-daemon.sh"] != string(script) {
		t.Error("ConfigMap gpushare-mps-daemon does not hold mps-daemon.sh as it is")
	}

	c = render(t, "kube-system", []string{"mps.enabled=true", "mps.root=/var/run/gpu-mps", "mps.shmSize=128m"})
	c.decode(t, "DaemonSet/gpushare-mps", &ds)
	env := envOf(ds.Spec.Template.Spec.Containers[0])
	if env["GPUSHARE_MPS_ROOT"] != "/var/run/gpu-mps" || env["GPUSHARE_MPS_SHM_SIZE"] != "128m" {
		t.Errorf("MPS daemon env %v ignores mps.root or mps.shmSize", env)
	}
	var sp appsv1.DaemonSet
	c.decode(t, "DaemonSet/share-plugin", &sp)
	spc := sp.Spec.Template.Spec.Containers[0]
	if _, ok := mountAt(spc, "/var/run/gpu-mps"); !ok || !slices.Contains(spc.Args, "--mps-root=/var/run/gpu-mps") {
		t.Errorf("share-plugin does not follow mps.root: args %v", spc.Args)
	}
}
