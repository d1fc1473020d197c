package manifests_test

import (
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
)

// chartPolicy compiles the chart's policy name together with its binding, as rendered.
func chartPolicy(t *testing.T, c chart, name string) compiled {
	t.Helper()
	var p admissionregistrationv1.ValidatingAdmissionPolicy
	c.decode(t, "ValidatingAdmissionPolicy/"+name, &p)
	var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
	c.decode(t, "ValidatingAdmissionPolicyBinding/"+name, &b)
	out := compile(t, &p)
	if len(out.errs) > 0 {
		t.Fatalf("%s: CEL compile errors:\n%s", name, strings.Join(out.errs, "\n"))
	}
	if err := narrowsOnlyByNamespaceName(&b); err != nil {
		t.Fatalf("binding %s: %v", name, err)
	}
	out.binding = &b
	return out
}

// TestChartUnclaimedExemptions: the namespaces whose pods may set NVIDIA_* (the release's
// and admission.reservedEnv.exemptNamespaces) are the ones share-plugin's watchdog does not
// report for using cards without gpu-mem.
func TestChartUnclaimedExemptions(t *testing.T) {
	tests := []struct {
		ns   string
		sets []string
		want string
	}{
		{"kube-system", nil, "--unclaimed-exempt-namespaces=kube-system"},
		{"gpu-system", nil, "--unclaimed-exempt-namespaces=gpu-system,kube-system"},
		{"gpu-system", []string{"admission.reservedEnv.exemptNamespaces={gpu-operator,gpu-system}"}, "--unclaimed-exempt-namespaces=gpu-system,gpu-operator"},
	}
	for _, tt := range tests {
		var ds appsv1.DaemonSet
		render(t, tt.ns, tt.sets).decode(t, "DaemonSet/share-plugin", &ds)
		if args := ds.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, tt.want) {
			t.Errorf("release in %s with %v: share-plugin args %v lack %s", tt.ns, tt.sets, args, tt.want)
		}
	}
}

// TestChartReservedEnvExemptions: the chart's exempt namespaces and users reach
// gpushare-reserved-env, its release namespace (where its DaemonSets set NVIDIA_*) is always
// exempt, and no one else is.
func TestChartReservedEnvExemptions(t *testing.T) {
	const ciBot = "system:serviceaccount:ci:image-tester"
	nvidia := envVar("NVIDIA_VISIBLE_DEVICES")
	t.Run("defaults, release in gpu-system", func(t *testing.T) {
		c := chartPolicy(t, render(t, "gpu-system", nil), reservedEnvPolicy)
		runAdmitCases(t, c, allowUsers{}, []admitCase{
			{"release namespace", createPod(sa(daemonSetController, ""), envPod("gpu-system", 0, nvidia)), ""},
			{"kube-system", createPod(sa(daemonSetController, ""), envPod("kube-system", 0, nvidia)), ""},
			{"tenant namespace", createPod(tenant(), envPod("team-a", 1, nvidia)), "sets NVIDIA_VISIBLE_DEVICES"},
			{"another namespace", createPod(sa(daemonSetController, ""), envPod("gpu-operator", 0, nvidia)), "sets NVIDIA_VISIBLE_DEVICES"},
			{"a user", createPod(sa(ciBot, ""), envPod("team-a", 0, nvidia)), "sets NVIDIA_VISIBLE_DEVICES"},
		})
	})
	t.Run("exempt gpu-operator and a user", func(t *testing.T) {
		c := chartPolicy(t, render(t, "gpu-system", []string{"admission.reservedEnv.exemptNamespaces={gpu-operator}",
			"admission.reservedEnv.exemptUsernames={" + ciBot + "}"}), reservedEnvPolicy)
		runAdmitCases(t, c, allowUsers{}, []admitCase{
			{"release namespace", createPod(sa(daemonSetController, ""), envPod("gpu-system", 0, nvidia)), ""},
			{"named namespace", createPod(sa(daemonSetController, ""), envPod("gpu-operator", 0, nvidia)), ""},
			{"kube-system, no longer named", createPod(sa(daemonSetController, ""), envPod("kube-system", 0, nvidia)), "sets NVIDIA_VISIBLE_DEVICES"},
			{"named user", createPod(sa(ciBot, ""), envPod("team-a", 0, nvidia)), ""},
			{"named user's debug container", addDebug(sa(ciBot, ""), envPod("team-a", 0), withDebug(envPod("team-a", 0), "d", nvidia)), ""},
			{"tenant", createPod(tenant(), envPod("team-a", 1, nvidia)), "sets NVIDIA_VISIBLE_DEVICES"},
		})
	})
	t.Run("disabled", func(t *testing.T) {
		c := render(t, "kube-system", []string{"admission.reservedEnv.enabled=false"})
		for _, k := range []string{"ValidatingAdmissionPolicy/" + reservedEnvPolicy, "ValidatingAdmissionPolicyBinding/" + reservedEnvPolicy} {
			if _, ok := c[k]; ok {
				t.Errorf("admission.reservedEnv.enabled=false still renders %s", k)
			}
		}
		if _, ok := c["ValidatingAdmissionPolicy/gpushare-allocation-annotations"]; !ok {
			t.Error("admission.reservedEnv.enabled=false drops the other policies")
		}
	})
	t.Run("the chart's DaemonSets are admitted", func(t *testing.T) {
		for _, ns := range []string{"kube-system", "gpu-system"} {
			c := render(t, ns, []string{"mps.enabled=true"})
			p := chartPolicy(t, c, reservedEnvPolicy)
			for _, k := range []string{"DaemonSet/share-plugin", "DaemonSet/gpushare-mps"} {
				var ds appsv1.DaemonSet
				c.decode(t, k, &ds)
				pod := envPod(ns, 0)
				pod.Spec = ds.Spec.Template.Spec
				if got := p.admit(t, createPod(sa(daemonSetController, ""), pod), allowUsers{}); got != "" {
					t.Errorf("%s in %s refused: %s", k, ns, got)
				}
				pod.Namespace = "team-a"
				if got := p.admit(t, createPod(sa(daemonSetController, ""), pod), allowUsers{}); !strings.Contains(got, "sets NVIDIA_") {
					t.Errorf("%s in a tenant's namespace: got %q, want a refusal (the test proves nothing otherwise)", k, got)
				}
			}
		}
	})
}
