package manifests_test

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpushare/gpushare/internal/chartdocs"
)

// monitoringSets turns on every optional monitoring object.
var monitoringSets = []string{
	"monitoring.serviceMonitor.enabled=true", "monitoring.prometheusRule.enabled=true",
	"monitoring.dashboard.enabled=true",
}

const withPrometheusOperator = "--api-versions=monitoring.coreos.com/v1"

// TestChartLint: helm lint --strict passes for both topologies, with and without monitoring
// (lint takes no --api-versions; TestChartMonitoring renders the monitoring objects).
func TestChartLint(t *testing.T) {
	for _, topology := range []string{"extender", "scheduler"} {
		for _, sets := range [][]string{nil, monitoringSets} {
			args := []string{"lint", "--strict", chartDir, "--set", "topology=" + topology}
			for _, s := range sets {
				args = append(args, "--set", s)
			}
			if out, err := helm(t, args...); err != nil {
				t.Errorf("%v\n%s", err, out)
			}
		}
	}
}

// TestChartTopologies: the topology value switches which front end is rendered; the
// share-plugin DaemonSet and the admission policies are in both.
func TestChartTopologies(t *testing.T) {
	common := []string{"DaemonSet/share-plugin", "ServiceAccount/share-plugin", "ClusterRole/gpushare:share-plugin",
		"ValidatingAdmissionPolicy/gpushare-allocation-annotations", "ValidatingAdmissionPolicy/gpushare-share-plugin-node-scope",
		"ValidatingAdmissionPolicyBinding/gpushare-allocation-annotations", "ValidatingAdmissionPolicyBinding/gpushare-share-plugin-node-scope",
		"ValidatingAdmissionPolicy/gpushare-reserved-env", "ValidatingAdmissionPolicyBinding/gpushare-reserved-env"}
	extender := []string{"Deployment/gpushare-extender", "Service/gpushare-extender", "PodDisruptionBudget/gpushare-extender",
		"ConfigMap/gpushare-kube-scheduler-config", "Secret/gpushare-extender-tls", "Secret/gpushare-scheduler-client-tls",
		"Secret/gpushare-ca", "ClusterRole/gpushare-extender", "Role/gpushare-extender-leader-election"}
	scheduler := []string{"Deployment/gpushare-scheduler", "ConfigMap/gpushare-scheduler-config", "PodDisruptionBudget/gpushare-scheduler",
		"MutatingAdmissionPolicy/gpushare-scheduler-name", "MutatingAdmissionPolicyBinding/gpushare-scheduler-name",
		"ClusterRoleBinding/gpushare-scheduler", "Role/gpushare-scheduler-leader-election"}
	tests := []struct {
		topology      string
		want, notWant []string
	}{
		{"extender", append(slices.Clone(common), extender...), scheduler},
		{"scheduler", append(slices.Clone(common), scheduler...), extender},
	}
	for _, tt := range tests {
		t.Run(tt.topology, func(t *testing.T) {
			c := render(t, "kube-system", []string{"topology=" + tt.topology})
			for _, k := range tt.want {
				if _, ok := c[k]; !ok {
					t.Errorf("%s missing", k)
				}
			}
			for _, k := range tt.notWant {
				if _, ok := c[k]; ok {
					t.Errorf("%s rendered in topology %s", k, tt.topology)
				}
			}
			for k, o := range c {
				if o.Namespace != "" && o.Namespace != "kube-system" && o.Name != "gpushare-scheduler-authentication-reader" {
					t.Errorf("%s in namespace %s, want the release's", k, o.Namespace)
				}
			}
		})
	}
}

// TestChartMatchesDeploy: the chart grants each component exactly what deploy/ grants, and
// its admission policies are deploy/admission's, so the two install paths cannot drift.
func TestChartMatchesDeploy(t *testing.T) {
	evict := "sharePlugin.watchdog.overGrantAction=evict"
	tests := []struct {
		topology, deployFile, sa string
		sets                     []string
		extraDeploy              string // applied beside deployFile with these values
	}{
		{"extender", "extender/rbac.yaml", extenderSA, nil, ""},
		{"extender", "share-plugin/rbac.yaml", sharePluginSA, nil, ""},
		{"scheduler", "gpushare-scheduler/rbac.yaml", gpushareSchedulerSA, nil, ""},
		{"scheduler", "share-plugin/rbac.yaml", sharePluginSA, nil, ""},
		{"extender", "share-plugin/rbac.yaml", sharePluginSA, []string{evict}, "share-plugin/rbac-evict.yaml"},
		{"scheduler", "share-plugin/rbac.yaml", sharePluginSA, []string{evict}, "share-plugin/rbac-evict.yaml"},
		// mps.enabled: sharePlugin.watchdog.mpsEscapeAction's default evict needs it too.
		{"extender", "share-plugin/rbac.yaml", sharePluginSA, []string{"mps.enabled=true"}, "share-plugin/rbac-evict.yaml"},
		{"extender", "share-plugin/rbac.yaml", sharePluginSA, []string{"mps.enabled=true", "sharePlugin.watchdog.mpsEscapeAction=annotate"}, ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(append([]string{tt.topology, tt.deployFile}, tt.sets...), "/"), func(t *testing.T) {
			file := writeChart(t, render(t, "kube-system", append([]string{"topology=" + tt.topology}, tt.sets...)))
			deployFile := tt.deployFile
			if tt.extraDeploy != "" {
				deployFile = joinFiles(t, tt.deployFile, tt.extraDeploy)
			}
			if diff := cmp.Diff(grants(t, deployFile, tt.sa), grants(t, file, tt.sa)); diff != "" {
				t.Errorf("grants of %s: deploy/%s %s (-) vs chart (+):\n%s", tt.sa, tt.deployFile, tt.extraDeploy, diff)
			}
		})
	}

	c := render(t, "kube-system", nil)
	var ds appsv1.DaemonSet
	c.decode(t, "DaemonSet/share-plugin", &ds)
	if diff := cmp.Diff(handoverOf(deployDaemonSet(t, "share-plugin/daemonset.yaml").Spec.Template.Spec), handoverOf(ds.Spec.Template.Spec)); diff != "" {
		t.Errorf("share-plugin's handover: deploy/share-plugin (-) vs chart (+):\n%s", diff)
	}
	// kubelet refuses gpu-mem pods until it has read the device list: the DaemonSet is Ready
	// only then, in both install paths.
	for what, spec := range map[string]corev1.PodSpec{
		"deploy/share-plugin": deployDaemonSet(t, "share-plugin/daemonset.yaml").Spec.Template.Spec,
		"chart":               ds.Spec.Template.Spec,
	} {
		c := spec.Containers[0]
		if rp := c.ReadinessProbe; rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Path != "/readyz" {
			t.Errorf("%s: container %s has no readiness probe on /readyz: %+v", what, c.Name, rp)
		}
		if lp := c.LivenessProbe; lp == nil || lp.HTTPGet == nil || lp.HTTPGet.Path != "/healthz" {
			t.Errorf("%s: container %s has no liveness probe on /healthz: %+v", what, c.Name, lp)
		}
	}
	deployed := load(t)
	for name, want := range deployed.policies {
		var got admissionregistrationv1.ValidatingAdmissionPolicy
		c.decode(t, "ValidatingAdmissionPolicy/"+name, &got)
		if diff := cmp.Diff(want.Spec, got.Spec); diff != "" {
			t.Errorf("policy %s: deploy/admission (-) vs chart (+):\n%s", name, diff)
		}
	}
	for name, want := range deployed.bindings {
		var got admissionregistrationv1.ValidatingAdmissionPolicyBinding
		c.decode(t, "ValidatingAdmissionPolicyBinding/"+name, &got)
		if diff := cmp.Diff(want.Spec, got.Spec); diff != "" {
			t.Errorf("binding %s: deploy/admission (-) vs chart (+):\n%s", name, diff)
		}
	}
}

// joinFiles writes the deploy/ files into one manifest file, as kubectl applies them together.
func joinFiles(t *testing.T, files ...string) string {
	t.Helper()
	var b strings.Builder
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(raw)
		b.WriteString("\n---\n")
	}
	out := filepath.Join(t.TempDir(), "joined.yaml")
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// writeChart writes the rendered objects into one manifest file for the deploy/ helpers.
func writeChart(t *testing.T, c chart) string {
	t.Helper()
	var b strings.Builder
	for _, o := range c {
		b.Write(o.raw)
		b.WriteString("\n---\n")
	}
	f := filepath.Join(t.TempDir(), "chart.yaml")
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestChartNamespace: installed elsewhere than kube-system, every reference to a service
// account, Lease or Service follows the release's namespace.
func TestChartNamespace(t *testing.T) {
	const ns = "gpu-system"
	for _, topology := range []string{"extender", "scheduler"} {
		c := render(t, ns, []string{"topology=" + topology})
		for k, o := range c {
			// kube-system is where that RoleBinding must be, and an exempt namespace of
			// gpushare-reserved-env and of share-plugin's reports of use without a grant by default
			// (TestChartReservedEnvExemptions, TestChartUnclaimedExemptions).
			raw := strings.ReplaceAll(string(o.raw), "--unclaimed-exempt-namespaces="+ns+",kube-system", "")
			if strings.Contains(raw, "kube-system") && k != "RoleBinding/gpushare-scheduler-authentication-reader" &&
				k != "ValidatingAdmissionPolicyBinding/"+reservedEnvPolicy {
				t.Errorf("%s (%s) still names kube-system", k, topology)
			}
		}
		var p admissionregistrationv1.ValidatingAdmissionPolicy
		c.decode(t, "ValidatingAdmissionPolicy/gpushare-allocation-annotations", &p)
		if got := p.Spec.MatchConditions[2].Expression; !strings.Contains(got, "system:serviceaccount:"+ns+":share-plugin") {
			t.Errorf("%s: match condition %q does not name %s's share-plugin", topology, got, ns)
		}
	}
	c := render(t, ns, nil)
	var cm corev1.ConfigMap
	c.decode(t, "ConfigMap/gpushare-kube-scheduler-config", &cm)
	if !strings.Contains(cm.Data["scheduler-config.yaml"], "https://gpushare-extender."+ns+".svc:12345/gpushare-scheduler") {
		t.Errorf("kube-scheduler configuration does not call the extender in %s:\n%s", ns, cm.Data["scheduler-config.yaml"])
	}
}

// TestChartSchedulerConfigs: the KubeSchedulerConfigurations the chart renders are deploy/'s
// (deploy/scheduler for the extender, deploy/gpushare-scheduler for the plugin) with the
// chart's values in their places.
func TestChartSchedulerConfigs(t *testing.T) {
	tests := []struct {
		topology, configMap, deployFile string
		// edit turns deploy/'s file into what the chart renders with default values.
		edit func(m map[string]any)
	}{
		{"extender", "gpushare-kube-scheduler-config", "scheduler/scheduler-config.yaml", func(m map[string]any) {
			tls := m["extenders"].([]any)[0].(map[string]any)["tlsConfig"].(map[string]any)
			tls["certFile"], tls["keyFile"] = "/etc/kubernetes/gpushare/tls.crt", "/etc/kubernetes/gpushare/tls.key"
		}},
		{"scheduler", "gpushare-scheduler-config", "gpushare-scheduler/scheduler-config.yaml", func(map[string]any) {}},
	}
	for _, tt := range tests {
		t.Run(tt.topology, func(t *testing.T) {
			var cm corev1.ConfigMap
			render(t, "kube-system", []string{"topology=" + tt.topology}).decode(t, "ConfigMap/"+tt.configMap, &cm)
			var got, want map[string]any
			if err := yaml.Unmarshal([]byte(cm.Data["scheduler-config.yaml"]), &got); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(tt.deployFile)
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			tt.edit(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("deploy/%s (-) vs chart (+):\n%s", tt.deployFile, diff)
			}
		})
	}
}

// TestChartValues: values that change what runs reach the objects.
func TestChartValues(t *testing.T) {
	t.Run("policy and selectors", func(t *testing.T) {
		c := render(t, "kube-system", []string{"policy=fgd", "gpuNodeSelector=gpu=shared", "sharePlugin.simulate=t4",
			"sharePlugin.runtimeClassName=nvidia", "sharePlugin.deviceListStrategy=cdi-cri", "image.registry=registry.example.com/"})
		var d appsv1.Deployment
		c.decode(t, "Deployment/gpushare-extender", &d)
		args := d.Spec.Template.Spec.Containers[0].Args
		for _, want := range []string{"--policy=fgd", "--node-selector=gpu=shared"} {
			if !slices.Contains(args, want) {
				t.Errorf("extender args %v lack %s", args, want)
			}
		}
		var ds appsv1.DaemonSet
		c.decode(t, "DaemonSet/share-plugin", &ds)
		spec := ds.Spec.Template.Spec
		if !slices.Contains(spec.Containers[0].Args, "--simulate=t4") || !slices.Contains(spec.Containers[0].Args, "--device-list-strategy=cdi-cri") {
			t.Errorf("share-plugin args %v", spec.Containers[0].Args)
		}
		if spec.RuntimeClassName == nil || *spec.RuntimeClassName != "nvidia" {
			t.Errorf("runtimeClassName = %v, want nvidia", spec.RuntimeClassName)
		}
		// Simulated cards with cdi-cri: their CDI spec goes to the host folder the runtime reads.
		if !slices.Contains(spec.Containers[0].Args, "--cdi-spec-dir=/var/run/cdi") || !mountsHostPath(spec, "/var/run/cdi") {
			t.Errorf("simulated cdi-cri share-plugin does not write its CDI spec to the host's /var/run/cdi: args %v", spec.Containers[0].Args)
		}
		for _, e := range spec.Containers[0].Env {
			if e.Name == "NVIDIA_VISIBLE_DEVICES" {
				t.Errorf("simulated share-plugin asks the NVIDIA runtime for every GPU")
			}
		}
		if img := spec.Containers[0].Image; !strings.HasPrefix(img, "registry.example.com/gpushare/share-plugin:") {
			t.Errorf("image %s ignores image.registry", img)
		}
	})
	t.Run("mps and toolkit hook flags", func(t *testing.T) {
		args := func(sets []string) []string {
			var ds appsv1.DaemonSet
			render(t, "kube-system", sets).decode(t, "DaemonSet/share-plugin", &ds)
			return ds.Spec.Template.Spec.Containers[0].Args
		}
		def := args(nil)
		for _, want := range []string{"--mps-ready-timeout=30s", "--mps-release-grace=2m", "--mps-daemon-overhead-mib=0"} {
			if !slices.Contains(def, want) {
				t.Errorf("default share-plugin args %v lack %s", def, want)
			}
		}
		for _, a := range def {
			if strings.HasPrefix(a, "--nvidia-cdi-hook-path") || strings.HasPrefix(a, "--nvidia-driver-root") {
				t.Errorf("default share-plugin args carry %s", a)
			}
		}
		set := args([]string{"mps.readyTimeout=1m", "mps.releaseGrace=5m", "mps.daemonOverheadMiB=320",
			"sharePlugin.nvidiaCDIHookPath=/usr/bin/nvidia-cdi-hook", "sharePlugin.nvidiaDriverRoot=/run/nvidia/driver"})
		for _, want := range []string{"--mps-ready-timeout=1m", "--mps-release-grace=5m", "--mps-daemon-overhead-mib=320",
			"--nvidia-cdi-hook-path=/usr/bin/nvidia-cdi-hook", "--nvidia-driver-root=/run/nvidia/driver"} {
			if !slices.Contains(set, want) {
				t.Errorf("share-plugin args %v lack %s", set, want)
			}
		}
	})
	t.Run("handover", func(t *testing.T) {
		tests := []struct {
			name string
			sets []string
			want handover
		}{
			{"default", nil, handover{"cdi-allocation", "/var/run/cdi", true}},
			{"cdi-allocation", []string{"sharePlugin.deviceListStrategy=cdi-allocation"}, handover{"cdi-allocation", "/var/run/cdi", true}},
			{"cdi-allocation, simulated, own folder", []string{"sharePlugin.deviceListStrategy=cdi-allocation", "sharePlugin.simulate=t4", "sharePlugin.cdiSpecDir=/etc/cdi"},
				handover{"cdi-allocation", "/etc/cdi", true}},
			{"cdi-cri, simulated", []string{"sharePlugin.deviceListStrategy=cdi-cri", "sharePlugin.simulate=t4"}, handover{"cdi-cri", "/var/run/cdi", true}},
			// Real cards with cdi-cri: the node's spec comes from nvidia-ctk, share-plugin writes none.
			{"cdi-cri", []string{"sharePlugin.deviceListStrategy=cdi-cri"}, handover{Strategy: "cdi-cri"}},
			{"envvar", []string{"sharePlugin.deviceListStrategy=envvar"}, handover{Strategy: "envvar"}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				var ds appsv1.DaemonSet
				render(t, "kube-system", tc.sets).decode(t, "DaemonSet/share-plugin", &ds)
				if diff := cmp.Diff(tc.want, handoverOf(ds.Spec.Template.Spec)); diff != "" {
					t.Errorf("share-plugin's handover (-want,+got):\n%s", diff)
				}
			})
		}
	})
	t.Run("mutating policy version", func(t *testing.T) {
		for _, tt := range []struct{ kube, want string }{{"1.37.2", "admissionregistration.k8s.io/v1"}, {"1.36.0", "admissionregistration.k8s.io/v1"}, {"1.35.4", "admissionregistration.k8s.io/v1beta1"}} {
			c := render(t, "kube-system", []string{"topology=scheduler"}, "--kube-version", tt.kube)
			if got := c["MutatingAdmissionPolicy/gpushare-scheduler-name"].APIVersion; got != tt.want {
				t.Errorf("Kubernetes %s: MutatingAdmissionPolicy %s, want %s", tt.kube, got, tt.want)
			}
		}
		c := render(t, "kube-system", []string{"topology=scheduler", "scheduler.setSchedulerName.enabled=false"})
		if _, ok := c["MutatingAdmissionPolicy/gpushare-scheduler-name"]; ok {
			t.Error("setSchedulerName.enabled=false still renders the MutatingAdmissionPolicy")
		}
	})
	t.Run("scheduler on an older control plane", func(t *testing.T) {
		for _, tt := range []struct {
			kube string
			want bool
		}{{"1.37.2", false}, {"1.36.3", true}, {"1.35.4", true}} {
			var d appsv1.Deployment
			render(t, "kube-system", []string{"topology=scheduler"}, "--kube-version", tt.kube).decode(t, "Deployment/gpushare-scheduler", &d)
			got := slices.Contains(d.Spec.Template.Spec.Containers[0].Command, "--feature-gates=DRADeviceTaintRules=false")
			if got != tt.want {
				t.Errorf("Kubernetes %s: gpushare-scheduler turns DRADeviceTaintRules off: %v, want %v", tt.kube, got, tt.want)
			}
		}
	})
	t.Run("mutating policy", func(t *testing.T) {
		c := render(t, "kube-system", []string{"topology=scheduler", "scheduler.schedulerName=gpu-sched"})
		raw := string(c["MutatingAdmissionPolicy/gpushare-scheduler-name"].raw)
		for _, want := range []string{`schedulerName: "gpu-sched"`, `"aliyun.com/gpu-mem" in c.resources.limits`, "failurePolicy: Fail", "operations: [CREATE]"} {
			if !strings.Contains(raw, want) {
				t.Errorf("MutatingAdmissionPolicy lacks %s:\n%s", want, raw)
			}
		}
	})
}

// TestChartRejectsBadValues: values that cannot work stop the install with a message naming
// the value, instead of rendering something that fails later.
func TestChartRejectsBadValues(t *testing.T) {
	tests := []struct {
		name  string
		sets  []string
		flags []string
		want  string
	}{
		{"unknown topology", []string{"topology=both"}, nil, "/topology"},
		{"misspelt value", []string{"extender.replica=3"}, nil, "replica"},
		{"unknown policy", []string{"policy=tetris"}, nil, "/policy"},
		{"latest tag", []string{"image.tag=latest"}, nil, `image.tag: "latest" is refused`},
		{"host network with replicas", []string{"extender.hostNetwork=true"}, nil, "extender.hostNetwork"},
		{"service monitor without the CRD", []string{"monitoring.serviceMonitor.enabled=true"}, nil, "monitoring.coreos.com/v1"},
		{"rule without the CRD", []string{"monitoring.prometheusRule.enabled=true"}, nil, "monitoring.coreos.com/v1"},
		{"bad memory unit", []string{"sharePlugin.memoryUnit=KiB"}, nil, "memoryUnit"},
		{"registry without slash", []string{"image.registry=registry.example.com"}, nil, "/image/registry"},
		{"mps image latest", []string{"mps.enabled=true", "mps.image.tag=latest"}, nil, "/mps/image/tag"},
		{"mps root relative", []string{"mps.root=run/mps"}, nil, "/mps/root"},
		{"exempt namespace not a name", []string{"admission.reservedEnv.exemptNamespaces={Team_A}"}, nil, "/admission/reservedEnv/exemptNamespaces"},
		{"exempt user empty", []string{"admission.reservedEnv.exemptUsernames={}", "admission.reservedEnv.exemptUsernames[0]="}, nil, "/admission/reservedEnv/exemptUsernames"},
		{"two scheduler client names", []string{`extender.tls.schedulerClientName=a\,b`}, nil, "/extender/tls/schedulerClientName"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderErr(t, "kube-system", tt.sets, tt.flags...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

// TestChartTLS: the certificates the chart generates (no cert-manager) let kube-scheduler
// verify the extender under the name it calls and the extender verify kube-scheduler; the
// CA's key is in no Secret a pod mounts. With cert-manager the same names come from
// Certificates.
func TestChartTLS(t *testing.T) {
	for _, tt := range []struct {
		name     string
		sets     []string
		dnsName  string
		wantIP   bool
		verifyAs string
	}{
		{"service", nil, "gpushare-extender.kube-system.svc", false, "gpushare-extender.kube-system.svc"},
		{"host network", []string{"extender.hostNetwork=true", "extender.replicas=1", "extender.tls.extraSANs={extender.example.com}"}, "extender.example.com", true, "127.0.0.1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := render(t, "kube-system", tt.sets)
			server, ca := certOf(t, c, "Secret/gpushare-extender-tls")
			client, clientCA := certOf(t, c, "Secret/gpushare-scheduler-client-tls")
			if !ca.Equal(clientCA) {
				t.Fatal("serving and client certificates carry different CAs")
			}
			pool := x509.NewCertPool()
			pool.AddCert(ca)
			if _, err := server.Verify(x509.VerifyOptions{Roots: pool, DNSName: tt.verifyAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				t.Errorf("serving certificate for %s: %v", tt.verifyAs, err)
			}
			if err := server.VerifyHostname(tt.dnsName); err != nil {
				t.Errorf("serving certificate: %v", err)
			}
			if _, err := client.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("client certificate: %v", err)
			}
			if got := len(server.IPAddresses) > 0; got != tt.wantIP {
				t.Errorf("serving certificate IPs %v", server.IPAddresses)
			}
			for _, k := range []string{"Deployment/gpushare-extender", "DaemonSet/share-plugin"} {
				if strings.Contains(string(c[k].raw), "gpushare-ca") {
					t.Errorf("%s mounts the CA's key", k)
				}
			}
		})
	}
	t.Run("cert-manager", func(t *testing.T) {
		c := render(t, "kube-system", nil, "--api-versions=cert-manager.io/v1")
		for _, k := range []string{"Issuer/gpushare-selfsigned", "Certificate/gpushare-ca", "Issuer/gpushare-ca",
			"Certificate/gpushare-extender-tls", "Certificate/gpushare-scheduler-client-tls", "Certificate/gpushare-metrics-client-tls"} {
			if _, ok := c[k]; !ok {
				t.Errorf("%s missing", k)
			}
		}
		if _, ok := c["Secret/gpushare-ca"]; ok {
			t.Error("with cert-manager the chart still generates a CA")
		}
		if raw := string(c["Certificate/gpushare-extender-tls"].raw); !strings.Contains(raw, "gpushare-extender.kube-system.svc") {
			t.Errorf("serving Certificate lacks the Service name:\n%s", raw)
		}
	})
	t.Run("own secrets", func(t *testing.T) {
		c := render(t, "kube-system", []string{"extender.tls.source=secrets"})
		for k := range c {
			if strings.HasPrefix(k, "Secret/") || strings.HasPrefix(k, "Certificate/") {
				t.Errorf("tls.source=secrets renders %s", k)
			}
		}
	})
}

// TestChartVerbsAdmitOnlyTheScheduler: the extender's verbs port admits the client
// certificate the chart issues kube-scheduler, by its common name, and not the metrics one
// it issues Prometheus (nor any other certificate of the CA): --client-allowed-names is the
// scheduler certificate's commonName, with the generated certificates, with cert-manager's,
// and when the name is changed.
func TestChartVerbsAdmitOnlyTheScheduler(t *testing.T) {
	allowed := func(t *testing.T, c chart) []string {
		t.Helper()
		var d appsv1.Deployment
		c.decode(t, "Deployment/gpushare-extender", &d)
		var names []string
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			if v, ok := strings.CutPrefix(a, "--client-allowed-names="); ok {
				names = append(names, strings.Split(v, ",")...)
			}
		}
		if len(names) == 0 {
			t.Fatalf("extender args %v lack --client-allowed-names (the default would apply)", d.Spec.Template.Spec.Containers[0].Args)
		}
		return names
	}
	check := func(t *testing.T, names []string, scheduler, metrics string) {
		t.Helper()
		if !slices.Equal(names, []string{scheduler}) {
			t.Errorf("--client-allowed-names %v, want exactly the scheduler certificate's commonName %q", names, scheduler)
		}
		if slices.Contains(names, metrics) {
			t.Errorf("--client-allowed-names %v admits the metrics certificate %q on the verbs port", names, metrics)
		}
	}
	for _, tt := range []struct {
		name string
		sets []string
		want string
	}{
		{"generated", nil, "gpushare-kube-scheduler"},
		{"renamed", []string{"extender.tls.schedulerClientName=kube-scheduler.example.com"}, "kube-scheduler.example.com"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := render(t, "kube-system", tt.sets)
			scheduler, _ := certOf(t, c, "Secret/gpushare-scheduler-client-tls")
			metrics, _ := certOf(t, c, "Secret/gpushare-metrics-client-tls")
			if scheduler.Subject.CommonName != tt.want {
				t.Errorf("scheduler client certificate CN %q, want %q", scheduler.Subject.CommonName, tt.want)
			}
			check(t, allowed(t, c), scheduler.Subject.CommonName, metrics.Subject.CommonName)
		})
	}
	t.Run("cert-manager", func(t *testing.T) {
		c := render(t, "kube-system", nil, "--api-versions=cert-manager.io/v1")
		cn := func(key string) string {
			var crt struct {
				Spec struct {
					CommonName string `json:"commonName"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal(c[key].raw, &crt); err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			return crt.Spec.CommonName
		}
		scheduler, metrics := cn("Certificate/gpushare-scheduler-client-tls"), cn("Certificate/gpushare-metrics-client-tls")
		if scheduler == "" || metrics == "" || scheduler == metrics {
			t.Fatalf("Certificates' commonNames: scheduler %q, metrics %q", scheduler, metrics)
		}
		check(t, allowed(t, c), scheduler, metrics)
	})
}

// certOf returns the leaf certificate and CA of a kubernetes.io/tls Secret.
func certOf(t *testing.T, c chart, key string) (*x509.Certificate, *x509.Certificate) {
	t.Helper()
	var s corev1.Secret
	c.decode(t, key, &s)
	parse := func(b []byte) *x509.Certificate {
		blk, _ := pem.Decode(b)
		if blk == nil {
			t.Fatalf("%s: no PEM", key)
		}
		crt, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return crt
	}
	return parse(s.Data["tls.crt"]), parse(s.Data["ca.crt"])
}

// TestChartImages: every image the chart runs is a gpushare image at the release tag, and the
// chart's versions are the release's.
func TestChartImages(t *testing.T) {
	want := version(t)
	var meta struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	raw, err := os.ReadFile(chartDir + "/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.AppVersion != want || "v"+meta.Version != want {
		t.Errorf("Chart.yaml version %s appVersion %s, want %s (VERSION)", meta.Version, meta.AppVersion, want)
	}
	seen := map[string]bool{}
	for _, topology := range []string{"extender", "scheduler"} {
		for k, o := range render(t, "kube-system", []string{"topology=" + topology}) {
			for _, m := range regexp.MustCompile(`(?m)^\s*image: (\S+)$`).FindAllStringSubmatch(string(o.raw), -1) {
				name, tag, _ := strings.Cut(m[1], ":")
				seen[name] = true
				if tag != want {
					t.Errorf("%s runs %s, want tag %s", k, m[1], want)
				}
			}
		}
	}
	for _, name := range []string{"gpushare/extender", "gpushare/gpushare-scheduler", "gpushare/share-plugin"} {
		if !seen[name] {
			t.Errorf("the chart never runs %s (runs %v)", name, seen)
		}
	}
}

// TestChartReadme: the README's values table is the one hack/chartdocs derives from
// values.yaml (run `go run ./hack/chartdocs` after changing a value).
func TestChartReadme(t *testing.T) {
	values, err := os.ReadFile(chartDir + "/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := chartdocs.Rows(values)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < 40 {
		t.Errorf("only %d documented values", len(rows))
	}
	readme, err := os.ReadFile(chartDir + "/README.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := chartdocs.Splice(string(readme), chartdocs.Table(rows))
	if err != nil {
		t.Fatal(err)
	}
	if want != string(readme) {
		t.Error("deploy/helm/gpushare/README.md's values table is stale: run `go run ./hack/chartdocs`")
	}
}

// TestChartMonitoring: the dashboard is valid JSON, and every gpushare metric the dashboard
// and the alerts query is one the code exports (a renamed metric breaks this test, not an
// alert at 3 a.m.).
func TestChartMonitoring(t *testing.T) {
	dash, err := os.ReadFile(chartDir + "/dashboards/gpushare.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	exported := exportedMetrics(t)
	metricRE := regexp.MustCompile(`gpushare_[a-z_]+`)
	check := func(where, expr string) {
		for _, m := range metricRE.FindAllString(expr, -1) {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_count"), "_sum")
			if !exported[base] {
				t.Errorf("%s queries %s, which no package exports", where, m)
			}
		}
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			check("panel "+p.Title, tg.Expr)
		}
	}
	for _, topology := range []string{"extender", "scheduler"} {
		c := render(t, "kube-system", append([]string{"topology=" + topology}, monitoringSets...), withPrometheusOperator)
		var alerts []string
		for _, r := range alertRules(t, c) {
			alerts = append(alerts, r.Alert)
			check(topology+" alert "+r.Alert, r.Expr)
		}
		for _, want := range []string{"GPUShareCardOvercommitted", "GPUShareBindFailuresRising", "GPUSharePluginNotRegistered", "GPUSharePodUnclaimedGPUMemory", "GPUShareMPSEscape", "GPUShareContainerOverGrant", "GPUShareGrantUnderused"} {
			if !slices.Contains(alerts, want) {
				t.Errorf("%s: alerts %v lack %s", topology, alerts, want)
			}
		}
		down := map[string]string{"extender": "GPUShareExtenderDown", "scheduler": "GPUShareSchedulerDown"}[topology]
		if !slices.Contains(alerts, down) {
			t.Errorf("%s: alerts %v lack %s", topology, alerts, down)
		}
		var cm corev1.ConfigMap
		c.decode(t, "ConfigMap/gpushare-dashboard", &cm)
		if cm.Data["gpushare.json"] != string(dash) {
			t.Error("the dashboard ConfigMap does not hold dashboards/gpushare.json as it is")
		}
	}
}

// alertRule is one alert of the chart's PrometheusRule.
type alertRule struct {
	Alert string `json:"alert"`
	Expr  string `json:"expr"`
	For   string `json:"for"`
}

// alertRules are the alerts of the rendered PrometheusRule gpushare, in order.
func alertRules(t *testing.T, c chart) []alertRule {
	t.Helper()
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []alertRule `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(c["PrometheusRule/gpushare"].raw, &rule); err != nil {
		t.Fatal(err)
	}
	var out []alertRule
	for _, g := range rule.Spec.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// exportedMetrics are the gpushare_* names spelled in the non-test Go sources of pkg/.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	re := regexp.MustCompile(`"(gpushare_[a-z_]+)"`)
	err := filepath.WalkDir("../pkg", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !out["gpushare_card_allocated_units"] {
		t.Fatalf("found no metric names in ../pkg (%d)", len(out))
	}
	return out
}

// mountsHostPath reports whether the pod's first container mounts the host folder path at
// the same path, read-write.
func mountsHostPath(spec corev1.PodSpec, path string) bool {
	return mountsHostPathAs(spec, path, false)
}

// mountsHostPathAs reports whether the pod's first container mounts the host folder path at
// the same path, read-only or not as readOnly says.
func mountsHostPathAs(spec corev1.PodSpec, path string, readOnly bool) bool {
	for _, v := range spec.Volumes {
		if v.HostPath == nil || v.HostPath.Path != path {
			continue
		}
		for _, m := range spec.Containers[0].VolumeMounts {
			if m.Name == v.Name && m.MountPath == path && m.ReadOnly == readOnly {
				return true
			}
		}
	}
	return false
}
