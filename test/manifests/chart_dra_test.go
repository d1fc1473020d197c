package manifests_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apiserver/pkg/admission"
	"sigs.k8s.io/yaml"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// draChartObjects are what backend=dra installs, and only it.
var draChartObjects = []string{"DeviceClass/" + gpushare.DRADriverName, "DaemonSet/gpushare-dra-plugin", "Service/gpushare-dra-plugin-metrics",
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
	for name, spec := range map[string]corev1.PodSpec{"deploy/dra": want, "the chart": got} {
		if p := spec.Containers[0].ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.String() != "metrics" {
			t.Errorf("%s: readiness probe %+v, want GET /readyz on the metrics port", name, p)
		}
	}
	if diff := cmp.Diff(want.Containers[0].ReadinessProbe, got.Containers[0].ReadinessProbe); diff != "" {
		t.Errorf("readiness probe: deploy/dra (-) vs chart (+):\n%s", diff)
	}
	var svc corev1.Service
	c.decode(t, "Service/gpushare-dra-plugin-metrics", &svc)
	deployedSvc := deployObject[corev1.Service](t, "dra/service.yaml", "Service")
	if diff := cmp.Diff(deployedSvc.Spec, svc.Spec); diff != "" {
		t.Errorf("metrics Service: deploy/dra (-) vs chart (+):\n%s", diff)
	}
	if svc.Spec.Selector["app.kubernetes.io/name"] != ds.Spec.Template.Labels["app.kubernetes.io/name"] || svc.Spec.Ports[0].TargetPort.String() != "metrics" || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("metrics Service %+v: want the DaemonSet's pods' port metrics, not-ready ones too", svc.Spec)
	}
	if got.ServiceAccountName != "gpushare-dra-plugin" || got.HostPID {
		t.Errorf("service account %q hostPID %v, want gpushare-dra-plugin and no host PID namespace", got.ServiceAccountName, got.HostPID)
	}
}

// TestChartDRAMonitoring: with backend=dra the ServiceMonitor scrapes the DRA plugin's
// Service and the PrometheusRule alerts on its state, on metrics pkg/dra exports.
func TestChartDRAMonitoring(t *testing.T) {
	exported := exportedMetrics(t)
	for _, backend := range []string{"dra", "device-plugin"} {
		c := render(t, "kube-system", append([]string{"backend=" + backend}, monitoringSets...), withPrometheusOperator)
		_, monitored := c["ServiceMonitor/gpushare-dra-plugin"]
		if monitored != (backend == "dra") {
			t.Errorf("backend=%s: ServiceMonitor/gpushare-dra-plugin rendered %v", backend, monitored)
		}
		exprs := map[string]string{}
		for _, r := range alertRules(t, c) {
			exprs[r.Alert] = r.Expr
		}
		for _, alert := range []string{"GPUShareDRAPluginNotRegistered", "GPUShareDRASliceNotPublished", "GPUShareDRAPrepareFailures", "GPUShareDRAPluginDown"} {
			expr, ok := exprs[alert]
			if ok != (backend == "dra") {
				t.Errorf("backend=%s: alert %s rendered %v", backend, alert, ok)
				continue
			}
			if !ok {
				continue
			}
			if !strings.Contains(expr, `job="gpushare-dra-plugin-metrics"`) {
				t.Errorf("alert %s: %s, want the DRA plugin Service's job", alert, expr)
			}
			for _, m := range regexp.MustCompile(`gpushare_[a-z_]+`).FindAllString(expr, -1) {
				if !exported[m] {
					t.Errorf("alert %s queries %s, which no package exports", alert, m)
				}
			}
		}
	}
	var sm struct {
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Endpoints []struct {
				Port string `json:"port"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	c := render(t, "kube-system", append([]string{"backend=dra"}, monitoringSets...), withPrometheusOperator)
	if err := yaml.Unmarshal(c["ServiceMonitor/gpushare-dra-plugin"].raw, &sm); err != nil {
		t.Fatal(err)
	}
	var svc corev1.Service
	c.decode(t, "Service/gpushare-dra-plugin-metrics", &svc)
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.Labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s, the Service has %q", k, v, svc.Labels[k])
		}
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != svc.Spec.Ports[0].Name {
		t.Errorf("ServiceMonitor endpoints %+v, want the Service's port %s", sm.Spec.Endpoints, svc.Spec.Ports[0].Name)
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
