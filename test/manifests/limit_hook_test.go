package manifests_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// limitHook is how a share-plugin DaemonSet installs gpushare-limit-hook and names it: the
// folder its init container installs into, the host folder mounted there, and the hook path
// share-plugin puts in the per-allocation CDI specs (--limit-hook-path).
type limitHook struct {
	InstallDir, HostDir, HookPath string
}

func limitHookOf(spec corev1.PodSpec) limitHook {
	var h limitHook
	for _, c := range spec.InitContainers {
		if len(c.Command) != 3 || c.Command[0] != "/usr/bin/gpushare-limit-hook" || c.Command[1] != "install" {
			continue
		}
		h.InstallDir = c.Command[2]
		for _, m := range c.VolumeMounts {
			for _, v := range spec.Volumes {
				if m.Name == v.Name && m.MountPath == h.InstallDir && !m.ReadOnly && v.HostPath != nil {
					h.HostDir = v.HostPath.Path
				}
			}
		}
	}
	for _, a := range spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--limit-hook-path="); ok {
			h.HookPath = v
		}
	}
	return h
}

// TestSharePluginInstallsLimitHook: deploy/ and the chart install gpushare-limit-hook into a
// host folder mounted at the same path, and share-plugin names the installed file, so the
// path in the CDI specs is where the runtime finds the hook; the chart's folder follows
// sharePlugin.limitHookDir.
func TestSharePluginInstallsLimitHook(t *testing.T) {
	want := limitHook{InstallDir: "/var/lib/gpushare/bin", HostDir: "/var/lib/gpushare/bin", HookPath: "/var/lib/gpushare/bin/gpushare-limit-hook"}
	if d := cmp.Diff(want, limitHookOf(deployDaemonSet(t, "share-plugin/daemonset.yaml").Spec.Template.Spec)); d != "" {
		t.Errorf("deploy/share-plugin (-want,+got):\n%s", d)
	}
	for _, tc := range []struct {
		sets []string
		want limitHook
	}{
		{nil, want},
		{[]string{"sharePlugin.limitHookDir=/opt/gpushare/bin"}, limitHook{InstallDir: "/opt/gpushare/bin", HostDir: "/opt/gpushare/bin", HookPath: "/opt/gpushare/bin/gpushare-limit-hook"}},
	} {
		var ds appsv1.DaemonSet
		render(t, "kube-system", tc.sets).decode(t, "DaemonSet/share-plugin", &ds)
		if d := cmp.Diff(tc.want, limitHookOf(ds.Spec.Template.Spec)); d != "" {
			t.Errorf("chart %v (-want,+got):\n%s", tc.sets, d)
		}
	}
	if _, err := renderErr(t, "kube-system", []string{"sharePlugin.limitHookDir=relative/bin"}); err == nil {
		t.Error("the chart accepts a relative sharePlugin.limitHookDir")
	}
}
