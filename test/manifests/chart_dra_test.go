package manifests_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apiserver/pkg/admission"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// draChartObjects are what backend=dra installs, and only it.
var draChartObjects = []string{"DeviceClass/" + gpushare.DRADriverName, "DaemonSet/gpushare-dra-plugin",
	"ServiceAccount/gpushare-dra-plugin", "ClusterRole/gpushare:dra-plugin", "ClusterRoleBinding/gpushare:dra-plugin",
	"ValidatingAdmissionPolicy/" + draNodeScopePolicy, "ValidatingAdmissionPolicyBinding/" + draNodeScopePolicy}

// devicePluginChartObjects are what backend=dra installs instead.
var devicePluginChartObjects = []string{"DaemonSet/share-plugin", "Service/share-plugin-metrics",
	"ServiceAccount/share-plugin", "ClusterRole/gpushare:share-plugin"}

// TestChartBackend: backend=dra installs the DRA back end instead of the device plugin's
// DaemonSet, in both topologies; the default installs none of it.
func TestChartBackend(t *testing.T) {
	tests := []struct {
		sets          []string
		want, notWant []string
	}{
		{nil, devicePluginChartObjects, draChartObjects},
		{[]string{"backend=device-plugin", "topology=scheduler"}, devicePluginChartObjects, draChartObjects},
		{[]string{"backend=dra"}, draChartObjects, devicePluginChartObjects},
		{[]string{"backend=dra", "topology=scheduler"}, draChartObjects, devicePluginChartObjects},
	}
	for _, tt := range tests {
		c := render(t, "kube-system", tt.sets)
		for _, k := range tt.want {
			if _, ok := c[k]; !ok {
				t.Errorf("%v: %s missing", tt.sets, k)
			}
		}
		for _, k := range tt.notWant {
			if _, ok := c[k]; ok {
				t.Errorf("%v: %s rendered", tt.sets, k)
			}
		}
	}
	if _, err := renderErr(t, "kube-system", []string{"backend=nri"}); err == nil {
		t.Error("backend=nri rendered; want the schema to refuse it")
	}
}

// TestChartDRAMatchesDeploy: the chart's DRA back end is deploy/dra's: the same grants, the
// same DeviceClass and admission policy, and a DaemonSet mounting kubelet's plugin folders
// and the CDI folder at the host's paths on the nodes labelled for it.
func TestChartDRAMatchesDeploy(t *testing.T) {
	c := render(t, "kube-system", []string{"backend=dra"})
	if diff := cmp.Diff(grants(t, "dra/rbac.yaml", draPluginSA), grants(t, writeChart(t, c), draPluginSA)); diff != "" {
		t.Errorf("grants of %s: deploy/dra (-) vs chart (+):\n%s", draPluginSA, diff)
	}
	deployed := loadPolicies(t, "dra/node-scope.yaml")
	var p admissionregistrationv1.ValidatingAdmissionPolicy
	c.decode(t, "ValidatingAdmissionPolicy/"+draNodeScopePolicy, &p)
	if diff := cmp.Diff(deployed.policies[draNodeScopePolicy].Spec, p.Spec); diff != "" {
		t.Errorf("policy %s: deploy/dra (-) vs chart (+):\n%s", draNodeScopePolicy, diff)
	}
	var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
	c.decode(t, "ValidatingAdmissionPolicyBinding/"+draNodeScopePolicy, &b)
	if diff := cmp.Diff(deployed.bindings[draNodeScopePolicy].Spec, b.Spec); diff != "" {
		t.Errorf("binding %s: deploy/dra (-) vs chart (+):\n%s", draNodeScopePolicy, diff)
	}
	var class resourceapi.DeviceClass
	c.decode(t, "DeviceClass/"+gpushare.DRADriverName, &class)
	if diff := cmp.Diff(decodeDRA(t, "dra/deviceclass.yaml").classes[0].Spec, class.Spec); diff != "" {
		t.Errorf("DeviceClass: deploy/dra (-) vs chart (+):\n%s", diff)
	}

	want := deployDaemonSet(t, "dra/daemonset.yaml").Spec.Template.Spec
	var ds appsv1.DaemonSet
	c.decode(t, "DaemonSet/gpushare-dra-plugin", &ds)
	got := ds.Spec.Template.Spec
	if diff := cmp.Diff(want.NodeSelector, got.NodeSelector); diff != "" || got.NodeSelector[gpushare.LabelBackend] != string(gpushare.BackendDRA) {
		t.Errorf("nodeSelector %v, want deploy/dra's %v", got.NodeSelector, want.NodeSelector)
	}
	for _, path := range []string{"/var/lib/kubelet/plugins/" + gpushare.DRADriverName, "/var/lib/kubelet/plugins_registry", "/var/run/cdi"} {
		if !mountsHostPath(want, path) || !mountsHostPath(got, path) {
			t.Errorf("host folder %s: mounted at its path by deploy/dra %v, by the chart %v; want both", path, mountsHostPath(want, path), mountsHostPath(got, path))
		}
	}
	if args := got.Containers[0].Args; !slices.Contains(args, "--backend=dra") || !slices.Contains(args, "--cdi-spec-dir=/var/run/cdi") {
		t.Errorf("chart's DRA plugin args %v lack --backend=dra or --cdi-spec-dir=/var/run/cdi", args)
	}
	for name, spec := range map[string]corev1.PodSpec{"deploy/dra": want, "the chart": got} {
		c := spec.Containers[0]
		if !slices.Contains(c.Args, "--metrics-address=:9401") || len(c.Ports) != 1 || c.Ports[0].Name != "metrics" || c.Ports[0].ContainerPort != 9401 {
			t.Errorf("%s: args %v ports %+v, want --metrics-address=:9401 on the port named metrics", name, c.Args, c.Ports)
		}
		// Without hostPID, pods RBAC and the node's usage annotation the watchdog would
		// only log failures.
		if !slices.Contains(c.Args, "--usage-interval=0") {
			t.Errorf("%s: args %v, want the usage watchdog off (--usage-interval=0)", name, c.Args)
		}
		if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.String() != "metrics" {
			t.Errorf("%s: liveness probe %+v, want GET /healthz on the metrics port", name, p)
		}
	}
	if diff := cmp.Diff(want.Containers[0].LivenessProbe, got.Containers[0].LivenessProbe); diff != "" {
		t.Errorf("liveness probe: deploy/dra (-) vs chart (+):\n%s", diff)
	}
	if got.ServiceAccountName != "gpushare-dra-plugin" || got.HostPID {
		t.Errorf("service account %q hostPID %v, want gpushare-dra-plugin and no host PID namespace", got.ServiceAccountName, got.HostPID)
	}
}

// TestChartDRANodeScope: the chart's policy names the plugin's service account of the
// release's namespace.
func TestChartDRANodeScope(t *testing.T) {
	var p admissionregistrationv1.ValidatingAdmissionPolicy
	render(t, "gpu-system", []string{"backend=dra"}).decode(t, "ValidatingAdmissionPolicy/"+draNodeScopePolicy, &p)
	plugin := "system:serviceaccount:gpu-system:gpushare-dra-plugin"
	runAdmitCases(t, compile(t, &p), allowUsers{}, []admitCase{
		{"plugin of node A creates node A's slice",
			request{user: sa(plugin, "gpu-a"), op: admission.Create, resource: "resourceslices", object: slice("gpu-a", gpushare.DRADriverName)}, ""},
		{"plugin of node A creates node B's slice",
			request{user: sa(plugin, "gpu-a"), op: admission.Create, resource: "resourceslices", object: slice("gpu-b", gpushare.DRADriverName)}, draNodeScopeRefusal},
	})
}
