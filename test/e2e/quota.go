//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

// CaseResourceQuotaGPUMem: deploy/examples/quota-gpu-mem.yaml (requests.aliyun.com/gpu-mem: 8)
// in a namespace admits two 4-unit pods and refuses the third at creation with the API
// server's quota message. Extended resources need nothing from gpushare to be quota'd.
func CaseResourceQuotaGPUMem(t *testing.T, e *Env) {
	ns := newNamespace(t, e)
	ctx := testContext(t, 2*time.Minute)
	// The file creates its namespace (team-a) before the quota; here the quota goes into the
	// test's own namespace instead.
	var quotas []*unstructured.Unstructured
	for _, obj := range decodeObjects(t, filepath.Join(e.cfg.repo, "deploy", "examples", "quota-gpu-mem.yaml")) {
		if obj.GetKind() == "ResourceQuota" {
			quotas = append(quotas, obj)
		}
	}
	if len(quotas) != 1 {
		t.Fatalf("deploy/examples/quota-gpu-mem.yaml: want one ResourceQuota, got %d", len(quotas))
	}
	quota := quotas[0]
	quota.SetNamespace(ns)
	if err := serverSideApply(ctx, e, quota, false); err != nil {
		t.Fatalf("applying the quota: %v", err)
	}
	// The quota controller publishes status.hard before the quota admission counts against it.
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		q, err := e.Client.CoreV1().ResourceQuotas(ns).Get(ctx, quota.GetName(), metav1.GetOptions{})
		return err == nil && len(q.Status.Hard) > 0, nil
	})
	if err != nil {
		t.Fatalf("quota status never set: %v", err)
	}
	node := newKwokNode(t, e, "quota", t4)
	for _, n := range []string{"first", "second"} {
		createPod(t, e, gpuPod(ns, n, node, ctr{units: 4}))
	}
	_, err = e.Client.CoreV1().Pods(ns).Create(ctx, gpuPod(ns, "third", node, ctr{units: 4}), metav1.CreateOptions{})
	want := "exceeded quota: gpu-mem, requested: requests.aliyun.com/gpu-mem=4, used: requests.aliyun.com/gpu-mem=8, limited: requests.aliyun.com/gpu-mem=8"
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("third 4-unit pod: %v, want Forbidden containing %q", err, want)
	}
	t.Logf("third pod refused: %v", err)
}

// kueueCRDs are the Kueue CRDs the recipe's objects need.
var kueueCRDs = []string{"kueue.x-k8s.io_resourceflavors.yaml", "kueue.x-k8s.io_clusterqueues.yaml", "kueue.x-k8s.io_localqueues.yaml"}

// CaseKueueRecipeDryRun: with Kueue's CRDs installed (hack/tools.sh kueue-crds, the version
// pinned there), every object of deploy/examples/kueue passes server-side dry-run, so the
// schemas check every field of the recipe docs/quotas.md gives.
func CaseKueueRecipeDryRun(t *testing.T, e *Env) {
	ctx := testContext(t, 3*time.Minute)
	dir, err := e.cfg.script(ctx, "tools.sh", "kueue-crds")
	if err != nil {
		t.Fatalf("finding Kueue's CRDs: %v", err)
	}
	for _, f := range kueueCRDs {
		installCRD(ctx, t, e, filepath.Join(dir, f))
	}
	kinds := []string{"ResourceFlavor", "ClusterQueue", "LocalQueue"}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		e.Mapper.Reset()
		for _, k := range kinds {
			if _, err := e.Mapper.RESTMapping(schema.GroupKind{Group: "kueue.x-k8s.io", Kind: k}, "v1beta2"); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("Kueue's CRDs are not served: %v", err)
	}
	ns := newNamespace(t, e)
	got := map[string]int{}
	for _, obj := range decodeObjects(t, filepath.Join(e.cfg.repo, "deploy", "examples", "kueue", "gpu-mem-queue.yaml")) {
		if obj.GetNamespace() != "" {
			obj.SetNamespace(ns)
		}
		if err := dryRunApply(ctx, e, obj); err != nil {
			t.Errorf("%s/%s: server-side dry-run: %v", obj.GetKind(), obj.GetName(), err)
			continue
		}
		got[obj.GetKind()]++
		if obj.GetKind() == "Job" {
			checkQueuedJob(t, obj.Object)
		}
	}
	want := map[string]int{"ResourceFlavor": 2, "ClusterQueue": 1, "LocalQueue": 1, "Job": 1}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("dry-run %d %s, want %d (all: %v)", got[k], k, n, got)
		}
	}
}

// checkQueuedJob checks that the recipe's Job names the LocalQueue and asks for gpu-mem.
func checkQueuedJob(t *testing.T, obj map[string]any) {
	t.Helper()
	var job batchv1.Job
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &job); err != nil {
		t.Fatalf("the recipe's Job: %v", err)
	}
	if q := job.Labels["kueue.x-k8s.io/queue-name"]; q != "gpu-mem" {
		t.Errorf("Job %s: label kueue.x-k8s.io/queue-name = %q, want gpu-mem", job.Name, q)
	}
	req, err := res.PodRequest(&corev1.Pod{Spec: job.Spec.Template.Spec})
	if err != nil || req.IsZero() {
		t.Errorf("Job %s asks for no gpu-mem (%v)", job.Name, err)
	}
}
