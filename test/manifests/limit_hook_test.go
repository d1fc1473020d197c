package manifests_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// limitHook is how a share-plugin DaemonSet installs gpushare-limit-hook and names it: the
// folder its init container installs into, the host folder mounted there, the hook path
// share-plugin puts in the CDI specs (--limit-hook-path), and the hook's failure folder
// (--limit-hook-failure-dir) with the host folder mounted, writable, at that path.
type limitHook struct {
	InstallDir, HostDir, HookPath string
	FailureDir, FailureHostDir    string
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
		if v, ok := strings.CutPrefix(a, "--limit-hook-failure-dir="); ok {
			h.FailureDir = v
		}
	}
	for _, m := range spec.Containers[0].VolumeMounts {
		for _, v := range spec.Volumes {
			if m.Name == v.Name && m.MountPath == h.FailureDir && !m.ReadOnly && v.HostPath != nil {
				h.FailureHostDir = v.HostPath.Path
			}
		}
	}
	return h
}

// TestSharePluginInstallsLimitHook: deploy/ and the chart install gpushare-limit-hook into a
// host folder mounted at the same path, and share-plugin names the installed file, so the
// path in the CDI specs is where the runtime finds the hook; the hook's failure folder is a
// host folder share-plugin sees at the path it hands the hook. The chart's folders follow
// sharePlugin.limitHookDir and sharePlugin.limitHookFailureDir, for both back ends.
func TestSharePluginInstallsLimitHook(t *testing.T) {
	const failures = "/var/lib/gpushare/limit-hook-failures"
	want := limitHook{InstallDir: "/var/lib/gpushare/bin", HostDir: "/var/lib/gpushare/bin", HookPath: "/var/lib/gpushare/bin/gpushare-limit-hook",
		FailureDir: failures, FailureHostDir: failures}
	for _, file := range []string{"share-plugin/daemonset.yaml", "dra/daemonset.yaml"} {
		if d := cmp.Diff(want, limitHookOf(deployDaemonSet(t, file).Spec.Template.Spec)); d != "" {
			t.Errorf("deploy/%s (-want,+got):\n%s", file, d)
		}
	}
	for _, tc := range []struct {
		sets []string
		ds   string
		want limitHook
	}{
		{nil, "share-plugin", want},
		{[]string{"backend=dra"}, "gpushare-dra-plugin", want},
		{[]string{"sharePlugin.limitHookDir=/opt/gpushare/bin", "sharePlugin.limitHookFailureDir=/opt/gpushare/failures"}, "share-plugin",
			limitHook{InstallDir: "/opt/gpushare/bin", HostDir: "/opt/gpushare/bin", HookPath: "/opt/gpushare/bin/gpushare-limit-hook",
				FailureDir: "/opt/gpushare/failures", FailureHostDir: "/opt/gpushare/failures"}},
	} {
		var ds appsv1.DaemonSet
		render(t, "kube-system", tc.sets).decode(t, "DaemonSet/"+tc.ds, &ds)
		if d := cmp.Diff(tc.want, limitHookOf(ds.Spec.Template.Spec)); d != "" {
			t.Errorf("chart %v (-want,+got):\n%s", tc.sets, d)
		}
	}
	for _, set := range []string{"sharePlugin.limitHookDir=relative/bin", "sharePlugin.limitHookFailureDir=relative/failures"} {
		if _, err := renderErr(t, "kube-system", []string{set}); err == nil {
			t.Errorf("the chart accepts %s", set)
		}
	}
}
