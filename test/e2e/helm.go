//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The chart, the release and the namespace the chart cases install into.
const (
	helmChart     = "deploy/helm/gpushare"
	helmRelease   = "gpushare"
	helmNamespace = "kube-system"
)

// helm runs the pinned helm (make e2e passes it in GPUSHARE_HELM) against the suite's
// cluster, with no user configuration; the error carries helm's output.
func helm(ctx context.Context, t *testing.T, e *Env, args ...string) (string, error) {
	t.Helper()
	bin := os.Getenv("GPUSHARE_HELM")
	if bin == "" {
		t.Skip("GPUSHARE_HELM unset: run the suite with make e2e (it builds the pinned helm)")
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = e.Repo()
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.Kubeconfig,
		"HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, out.String(), stderr.String())
	}
	return out.String(), nil
}

// serverVersion is the API server's version without the "v" (helm's --kube-version).
func serverVersion(t *testing.T, e *Env) string {
	t.Helper()
	v, err := e.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("reading the server version: %v", err)
	}
	return strings.TrimPrefix(v.GitVersion, "v")
}

// CaseHelmChartDryRun: every object the chart renders, for each topology, passes
// server-side dry-run against the real API server (the MutatingAdmissionPolicy included).
func CaseHelmChartDryRun(t *testing.T, e *Env) {
	ctx := testContext(t, 3*time.Minute)
	version := serverVersion(t, e)
	for _, tt := range []struct {
		topology, backend string
		want              []string
	}{
		{"extender", "device-plugin", []string{"Deployment/gpushare-extender", "Secret/gpushare-extender-tls", "ConfigMap/gpushare-kube-scheduler-config",
			"DaemonSet/share-plugin", "ValidatingAdmissionPolicy/gpushare-allocation-annotations"}},
		{"scheduler", "device-plugin", []string{"Deployment/gpushare-scheduler", "ConfigMap/gpushare-scheduler-config",
			"MutatingAdmissionPolicy/gpushare-scheduler-name", "MutatingAdmissionPolicyBinding/gpushare-scheduler-name", "DaemonSet/share-plugin"}},
		{"extender", "dra", []string{"DeviceClass/gpu-mem.gpushare.io", "DaemonSet/gpushare-dra-plugin", "Service/gpushare-dra-plugin-metrics", "ClusterRole/gpushare:dra-plugin",
			"ValidatingAdmissionPolicy/gpushare-dra-plugin-node-scope", "ValidatingAdmissionPolicyBinding/gpushare-dra-plugin-node-scope"}},
	} {
		t.Run(tt.topology+"/"+tt.backend, func(t *testing.T) {
			out, err := helm(ctx, t, e, "template", helmRelease, helmChart, "--namespace", helmNamespace,
				"--kube-version", version, "--set", "topology="+tt.topology, "--set", "backend="+tt.backend)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, obj := range decodeManifest(t, out) {
				key := obj.GetKind() + "/" + obj.GetName()
				if err := dryRunApply(ctx, e, obj); err != nil {
					t.Errorf("%s: server-side dry-run: %v", key, err)
					continue
				}
				seen[key] = true
			}
			for _, k := range tt.want {
				if !seen[k] {
					t.Errorf("%s was not dry-run (got %v)", k, seen)
				}
			}
		})
	}
}

// chartCRDs are the CRDs of the chart's optional objects: hack/tools.sh prints the folder of
// each project's CRDs (its pinned Go module), then the files the chart needs.
var chartCRDs = []struct {
	tool  string
	files []string
}{
	{"prometheus-operator-crds", []string{"monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml"}},
	{"cert-manager-crds", []string{"cert-manager.io_issuers.yaml", "cert-manager.io_certificates.yaml"}},
}

// CaseHelmChartCRDDryRun: with prometheus-operator's and cert-manager's CRDs installed, the
// chart's ServiceMonitors, PrometheusRule and dashboard ConfigMap, and (topology extender,
// tls.source auto finding cert-manager) its Issuers and Certificates pass server-side dry-run:
// the CRDs' schemas check every field.
func CaseHelmChartCRDDryRun(t *testing.T, e *Env) {
	ctx := testContext(t, 3*time.Minute)
	for _, c := range chartCRDs {
		dir, err := e.cfg.script(ctx, "tools.sh", c.tool)
		if err != nil {
			t.Fatalf("finding the CRDs (%s): %v", c.tool, err)
		}
		for _, f := range c.files {
			installCRD(ctx, t, e, filepath.Join(dir, f))
		}
	}
	want := []schema.GroupKind{{Group: "monitoring.coreos.com", Kind: "ServiceMonitor"}, {Group: "monitoring.coreos.com", Kind: "PrometheusRule"},
		{Group: "cert-manager.io", Kind: "Issuer"}, {Group: "cert-manager.io", Kind: "Certificate"}}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		e.Mapper.Reset()
		for _, gk := range want {
			if _, err := e.Mapper.RESTMapping(gk, "v1"); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the CRDs are not served: %v", err)
	}
	version := serverVersion(t, e)
	for _, tt := range []struct {
		topology, backend string
		want              map[string]int
	}{
		{"extender", "device-plugin", map[string]int{"ServiceMonitor": 2, "PrometheusRule": 1, "Issuer": 2, "Certificate": 4}},
		{"scheduler", "device-plugin", map[string]int{"ServiceMonitor": 2, "PrometheusRule": 1}},
		// The DRA plugin's ServiceMonitor besides the device plugin's.
		{"scheduler", "dra", map[string]int{"ServiceMonitor": 3, "PrometheusRule": 1}},
	} {
		t.Run(tt.topology+"/"+tt.backend, func(t *testing.T) {
			out, err := helm(ctx, t, e, "template", helmRelease, helmChart, "--namespace", helmNamespace,
				"--kube-version", version, "--api-versions", "monitoring.coreos.com/v1", "--api-versions", "cert-manager.io/v1",
				"--set", "topology="+tt.topology, "--set", "backend="+tt.backend,
				"--set", "monitoring.serviceMonitor.enabled=true", "--set", "monitoring.prometheusRule.enabled=true",
				"--set", "monitoring.dashboard.enabled=true")
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string]int{}
			for _, obj := range decodeManifest(t, out) {
				if err := dryRunApply(ctx, e, obj); err != nil {
					t.Errorf("%s/%s: server-side dry-run: %v", obj.GetKind(), obj.GetName(), err)
					continue
				}
				kinds[obj.GetKind()]++
			}
			for k, n := range tt.want {
				if kinds[k] != n {
					t.Errorf("dry-run %d %s, want %d (all: %v)", kinds[k], k, n, kinds)
				}
			}
		})
	}
}

// installCRD creates the CustomResourceDefinition in file for real and deletes it when the
// test ends.
func installCRD(ctx context.Context, t *testing.T, e *Env, file string) {
	t.Helper()
	objs := decodeObjects(t, file)
	if len(objs) != 1 || objs[0].GetKind() != "CustomResourceDefinition" {
		t.Fatalf("%s: want one CustomResourceDefinition", file)
	}
	crd := objs[0]
	if err := serverSideApply(ctx, e, crd, false); err != nil {
		t.Fatalf("installing %s: %v", crd.GetName(), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
		if err := e.Dynamic.Resource(gvr).Delete(ctx, crd.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting CRD %s: %v", crd.GetName(), err)
		}
	})
}

// decodeManifest splits helm's output into objects.
func decodeManifest(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	return decodeStream(t, "helm's output", strings.NewReader(manifest))
}

// CaseHelmInstall: `helm install` of the chart's topology into the local cluster, its pods
// running from the release images (make image) on the real node, and the reference notebooks
// scenario passing through it: in topology extender the cluster's kube-scheduler runs with the
// configuration and client certificate the chart renders; in topology scheduler pods name no
// scheduler and the chart's MutatingAdmissionPolicy hands them to gpushare-scheduler.
//
// The local cluster has no kube-proxy, so the chart's pods run on the host network and reach
// the API server at 127.0.0.1 (the chart's env value); the components the chart replaces
// (share-plugin, and gpushare-scheduler in topology scheduler) are stopped meanwhile and
// started again afterwards, with kube-scheduler's own configuration and deploy/admission.
func CaseHelmInstall(t *testing.T, e *Env, topology string) {
	requireRealNode(t, e)
	requireBinary(t, e, "extender", "gpushare-scheduler", "share-plugin")
	ctx := testContext(t, 10*time.Minute)
	if _, err := e.cfg.script(ctx, "build-component-images.sh"); err != nil {
		t.Fatalf("make image: %v", err)
	}
	if _, err := e.cfg.script(ctx, "load-images.sh"); err != nil {
		t.Fatalf("loading the images into containerd: %v", err)
	}
	api, err := url.Parse(e.Rest.Host)
	if err != nil {
		t.Fatalf("API server URL %q: %v", e.Rest.Host, err)
	}

	replaced := []string{"share-plugin"}
	if topology == "scheduler" {
		replaced = append(replaced, "gpushare-scheduler")
	}
	for _, c := range replaced {
		if err := e.StopComponent(ctx, c); err != nil {
			t.Fatalf("stopping the local %s: %v", c, err)
		}
	}
	// The chart brings deploy/admission's policies under its own name: remove the copies the
	// cluster applied (they are put back below).
	removeAdmissionPolicies(ctx, t, e)
	certDir := t.TempDir()
	// The init container installs gpushare-limit-hook here, not into the machine's own
	// /var/lib/gpushare/bin.
	hookDir := filepath.Join(e.cfg.state, "limit-hook")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		if out, err := helm(ctx, t, e, "uninstall", helmRelease, "--namespace", helmNamespace, "--wait", "--timeout", "2m"); err != nil {
			t.Errorf("helm uninstall: %v\n%s", err, out)
		}
		// --wait waits for the DaemonSet and Deployments, not for their pods. A chart
		// share-plugin still connected to kubelet when the local one registers on the same
		// socket path makes kubelet v1.37 refuse that path until kubelet restarts: the failed
		// registration drops the old client, whose disconnect then never clears the endpoint.
		if err := waitChartPodsGone(ctx, e); err != nil {
			t.Errorf("waiting for the chart's pods to go: %v", err)
		}
		// The chart's admission policies went with it: put deploy/admission's back.
		restore := append([]string{"admission"}, replaced...)
		if topology == "extender" {
			if err := e.RestartComponent(ctx, "kube-scheduler"); err != nil {
				t.Errorf("restoring kube-scheduler: %v", err)
			}
		}
		for _, c := range restore {
			if err := e.StartComponent(ctx, c); err != nil {
				t.Errorf("restarting the local %s: %v", c, err)
			}
		}
	})

	sets := []string{
		"topology=" + topology,
		"image.pullPolicy=Never",
		"sharePlugin.simulate=t4",
		// The chart's default cdi-allocation, in the folder the real node's containerd reads.
		"sharePlugin.cdiSpecDir=" + filepath.Join(e.cfg.state, "cdi"),
		"sharePlugin.limitHookDir=" + hookDir,
		"sharePlugin.hostNetwork=true",
		"sharePlugin.metricsPort=39401",
		"extender.hostNetwork=true",
		"extender.replicas=1",
		"extender.port=32345",
		"extender.diagnosticsPort=32346",
		"extender.schedulerConfig.certDir=" + certDir,
		// No cert-manager here (and the CRD case's CRDs may still be terminating, which
		// auto would take for cert-manager): the chart generates the material.
		"extender.tls.source=helm",
		"scheduler.hostNetwork=true",
		"scheduler.replicas=1",
		"scheduler.securePort=32259",
	}
	args := []string{"install", helmRelease, helmChart, "--namespace", helmNamespace, "--wait", "--timeout", "3m",
		"--set-json", fmt.Sprintf(`env=[{"name":"KUBERNETES_SERVICE_HOST","value":%q},{"name":"KUBERNETES_SERVICE_PORT","value":%q}]`, api.Hostname(), api.Port()),
		"--set-json", fmt.Sprintf(`extender.nodeSelector={"node-role.kubernetes.io/control-plane":null,%q:"true"}`, realNodeLabel),
		"--set-json", fmt.Sprintf(`scheduler.nodeSelector={%q:"true"}`, realNodeLabel),
		"--set-json", fmt.Sprintf(`sharePlugin.nodeSelector={%q:"true"}`, realNodeLabel),
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := helm(ctx, t, e, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("helm install (%s):\n%s", topology, out)
	if fi, err := os.Stat(filepath.Join(hookDir, "gpushare-limit-hook")); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Errorf("the share-plugin DaemonSet did not install an executable gpushare-limit-hook into %s: %v", hookDir, err)
	}
	if !strings.Contains(out, "kubectl inspect gpushare") {
		t.Errorf("NOTES do not say how to check the install:\n%s", out)
	}

	if topology == "extender" {
		useChartSchedulerConfig(ctx, t, e, certDir)
	} else {
		checkSchedulerNameMutation(ctx, t, e)
	}
	referenceScenario(t, e, "")
}

// useChartSchedulerConfig restarts kube-scheduler with the configuration and the client
// certificate the chart rendered, as the NOTES tell an operator to.
func useChartSchedulerConfig(ctx context.Context, t *testing.T, e *Env, certDir string) {
	t.Helper()
	sec, err := e.Client.CoreV1().Secrets(helmNamespace).Get(ctx, "gpushare-scheduler-client-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading kube-scheduler's client certificate: %v", err)
	}
	for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if len(sec.Data[f]) == 0 {
			t.Fatalf("secret gpushare-scheduler-client-tls has no %s", f)
		}
		if err := os.WriteFile(filepath.Join(certDir, f), sec.Data[f], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cm, err := e.Client.CoreV1().ConfigMaps(helmNamespace).Get(ctx, "gpushare-kube-scheduler-config", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the rendered kube-scheduler configuration: %v", err)
	}
	config := filepath.Join(certDir, "chart-scheduler-config.yaml")
	if err := os.WriteFile(config, []byte(cm.Data["scheduler-config.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data["scheduler-config.yaml"], "https://127.0.0.1:32345/gpushare-scheduler") {
		t.Fatalf("the rendered configuration does not call the host-network extender:\n%s", cm.Data["scheduler-config.yaml"])
	}
	if err := e.RestartComponent(ctx, "kube-scheduler", "GPUSHARE_SCHEDULER_CONFIG="+config); err != nil {
		t.Fatalf("restarting kube-scheduler with the chart's configuration: %v", err)
	}
}

// checkSchedulerNameMutation: a pod that requests gpu-mem and names no scheduler is created
// with gpushare-scheduler's name; one without gpu-mem, or naming a scheduler, keeps its own.
func checkSchedulerNameMutation(ctx context.Context, t *testing.T, e *Env) {
	t.Helper()
	ns := newNamespace(t, e)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	for _, tt := range []struct {
		name, sched, want string
		units             int64
	}{
		{"gpu", "", PluginSchedulerName, 4},
		{"gpu-named", "other-scheduler", "other-scheduler", 4},
		{"cpu", "", corev1.DefaultSchedulerName, 0},
	} {
		p := gpuPod(ns, tt.name, e.RealNode, ctr{units: tt.units})
		if tt.units == 0 {
			p.Spec.Containers[0].Resources.Limits = nil
		}
		p.Spec.SchedulerName = tt.sched
		got, err := e.Client.CoreV1().Pods(ns).Create(ctx, p, dry)
		if err != nil {
			t.Fatalf("dry-run create of pod %s: %v", tt.name, err)
		}
		if got.Spec.SchedulerName != tt.want {
			t.Errorf("pod %s (gpu-mem %d, schedulerName %q) created with schedulerName %q, want %q",
				tt.name, tt.units, tt.sched, got.Spec.SchedulerName, tt.want)
		}
	}
}

// removeAdmissionPolicies deletes the objects of deploy/admission that cluster-up applied.
func removeAdmissionPolicies(ctx context.Context, t *testing.T, e *Env) {
	t.Helper()
	for _, name := range []string{"gpushare-allocation-annotations", "gpushare-reserved-env", "gpushare-self-placement", "gpushare-share-plugin-node-scope"} {
		if err := e.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting ValidatingAdmissionPolicyBinding %s: %v", name, err)
		}
		if err := e.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting ValidatingAdmissionPolicy %s: %v", name, err)
		}
	}
	if err := e.Client.RbacV1().ClusterRoles().Delete(ctx, "gpushare:allocation-override", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("deleting ClusterRole gpushare:allocation-override: %v", err)
	}
}

// waitChartPodsGone waits until no pod of the release is left in its namespace (their
// containers have stopped once the API server forgets them). Errors: ctx done, or pods still
// there after 2 minutes (their names).
func waitChartPodsGone(ctx context.Context, e *Env) error {
	selector := "app.kubernetes.io/part-of=gpushare,app.kubernetes.io/instance=" + helmRelease
	var left []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := e.Client.CoreV1().Pods(helmNamespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, nil // the API server may be busy; poll again
		}
		left = left[:0]
		for _, p := range pods.Items {
			left = append(left, p.Name)
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("pods %v of release %s still in %s: %w", left, helmRelease, helmNamespace, err)
	}
	return nil
}
