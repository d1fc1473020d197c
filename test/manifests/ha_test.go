package manifests_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	schedconfigv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/routes"
	"github.com/gpushare/gpushare/pkg/serving"
)

// decodeFile strictly decodes the one-object YAML file into v.
func decodeFile(t *testing.T, file string, v any) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// TestHADeployment: two elected replicas on different nodes, the Service and the PDB cover
// them, only the leader is ready, and kube-scheduler calls the Service with its own leader
// election on.
func TestHADeployment(t *testing.T) {
	var d appsv1.Deployment
	decodeFile(t, "extender/deployment.yaml", &d)
	var svc corev1.Service
	decodeFile(t, "extender/service.yaml", &svc)
	var pdb policyv1.PodDisruptionBudget
	decodeFile(t, "extender/pdb.yaml", &pdb)
	var sched schedconfigv1.KubeSchedulerConfiguration
	decodeFile(t, "scheduler/scheduler-config.yaml", &sched)

	podLabels := labels.Set(d.Spec.Template.Labels)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("deployment replicas %v, want 2", d.Spec.Replicas)
	}
	if d.Spec.Template.Spec.HostNetwork {
		t.Error("deployment on the host network: the Service's endpoints must be the pods' own addresses")
	}
	aff := d.Spec.Template.Spec.Affinity
	if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Fatalf("deployment affinity %+v, want one required pod anti-affinity term", aff)
	}
	term := aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
	if sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector); err != nil || term.TopologyKey != corev1.LabelHostname || !sel.Matches(podLabels) {
		t.Errorf("anti-affinity term %+v: want topologyKey %s selecting the extender's own pods", term, corev1.LabelHostname)
	}
	c := d.Spec.Template.Spec.Containers[0]
	for _, want := range []string{"--leader-elect", "--leader-elect-resource-namespace=kube-system", "--leader-elect-resource-name=gpushare-extender",
		"--client-allowed-names=" + serving.DefaultClientAllowedName} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("extender args %v lack %s", c.Args, want)
		}
	}
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--bind-address=127.") }) {
		t.Errorf("extender args %v: a loopback bind address is out of the Service's reach", c.Args)
	}
	rp := c.ReadinessProbe
	if rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Path != routes.ReadyzPath || rp.HTTPGet.Port.IntValue() != 12346 ||
		rp.HTTPGet.Scheme != corev1.URISchemeHTTPS || rp.HTTPGet.Host != "" {
		t.Errorf("readiness probe %+v, want HTTPS /readyz on the diagnostics port 12346 at the pod's address", rp)
	}

	// The Service selects the leader: the pods' labels plus the one the leader sets on itself.
	leaderLabels := labels.Merge(podLabels, labels.Set{gpushare.LabelExtenderLeader: "true"})
	if sel := labels.SelectorFromSet(svc.Spec.Selector); !sel.Matches(leaderLabels) || sel.Matches(podLabels) {
		t.Errorf("service selector %v: want it to select the leader (%v) and not a follower (%v)", svc.Spec.Selector, leaderLabels, podLabels)
	}
	env := map[string]string{}
	for _, v := range c.Env {
		if v.ValueFrom != nil && v.ValueFrom.FieldRef != nil {
			env[v.Name] = v.ValueFrom.FieldRef.FieldPath
		}
	}
	if env["GPUSHARE_POD_NAME"] != "metadata.name" || env["GPUSHARE_POD_NAMESPACE"] != "metadata.namespace" {
		t.Errorf("extender env %v: want GPUSHARE_POD_NAME/NAMESPACE from the downward API (the leader labels its pod)", env)
	}
	if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || !sel.Matches(podLabels) {
		t.Errorf("PDB selector %v does not select the extender's pods", pdb.Spec.Selector)
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Namespace != d.Namespace {
		t.Errorf("PDB minAvailable %v in %s, want 1 in %s", pdb.Spec.MinAvailable, pdb.Namespace, d.Namespace)
	}

	if sched.LeaderElection.LeaderElect == nil || !*sched.LeaderElection.LeaderElect {
		t.Error("scheduler config: leaderElection.leaderElect is not true")
	}
	want := "https://" + svc.Name + "." + svc.Namespace + ".svc:12345" + routes.Prefix
	if len(sched.Extenders) != 1 || sched.Extenders[0].URLPrefix != want || !sched.Extenders[0].EnableHTTPS || sched.Extenders[0].TLSConfig == nil {
		t.Errorf("scheduler extenders %+v, want one at %s with enableHTTPS and tlsConfig", sched.Extenders, want)
	}
}

// TestLeaseRoleNamespace: the Role granting the Lease lives where the extender's flags put it.
func TestLeaseRoleNamespace(t *testing.T) {
	var d appsv1.Deployment
	decodeFile(t, "extender/deployment.yaml", &d)
	raw, err := os.ReadFile("extender/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for doc := range strings.SplitSeq(string(raw), "\n---\n") {
		var r rbacv1.Role
		if yaml.Unmarshal([]byte(doc), &r) != nil || r.Kind != "Role" {
			continue
		}
		found = true
		if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--leader-elect-resource-namespace="+r.Namespace) {
			t.Errorf("Role %s is in %s, the Deployment's --leader-elect-resource-namespace elsewhere", r.Name, r.Namespace)
		}
	}
	if !found {
		t.Fatal("extender/rbac.yaml has no Role")
	}
}
