//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/limithook"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// CaseLimitHookRecordsGrant: the real node labelled gpushare.io/isolation=limit, with two
// simulated T4s and the cdi-allocation strategy. share-plugin labels the node
// gpushare.io/isolation-enforced=limit; a pod requesting 2 units that sets its own MPS limit
// and grant variables runs, and the limit gpushare-limit-hook recorded for its container's
// cgroup on its card (run by runc as a createRuntime hook from the per-allocation CDI spec)
// is its grant, 2 × the unit, not what its env says; the limit recorded for the pod's cgroup is
// the pod's grant, the same. The records are removed when the pod is deleted, with its
// per-allocation spec.
func CaseLimitHookRecordsGrant(t *testing.T, e *Env) {
	requireRealNode(t, e)
	requireBinary(t, e, "extender", "share-plugin", "gpushare-limit-hook")
	ctx := testContext(t, 5*time.Minute)

	labelNode(ctx, t, e, e.RealNode, string(gpushare.IsolationLimit))
	inv := restartSharePlugin(ctx, t, e, "t4:2", "GPUSHARE_DEVICE_LIST_STRATEGY=cdi-allocation")
	t.Cleanup(func() { labelNode(context.Background(), t, e, e.RealNode, "") })
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, e.RealNode, metav1.GetOptions{})
		return err == nil && n.Labels[gpushare.LabelIsolationEnforced] == string(gpushare.IsolationLimit), nil
	})
	if err != nil {
		t.Errorf("node %s never labelled %s=%s", e.RealNode, gpushare.LabelIsolationEnforced, gpushare.IsolationLimit)
	}

	// kube-system: deploy/admission's policy exempts it, so the pod's own variables reach
	// the runtime.
	p := gpuPod(metav1.NamespaceSystem, "e2e-limit-"+rand.String(5), e.RealNode, ctr{units: 2})
	p.Spec.Containers[0].Env = []corev1.EnvVar{
		{Name: gpushare.EnvMPSPinnedMemLimit, Value: "0=99999M"},
		{Name: gpushare.EnvContainerUnits, Value: "14"},
		{Name: gpushare.EnvVisibleDevices, Value: "all"},
	}
	createPod(t, e, p)
	t.Cleanup(func() { deletePodAndWait(e, p.Namespace, p.Name) })
	p = waitPod(t, e, p.Namespace, p.Name, 2*time.Minute, "Running", isRunning)
	dev := onlyCard(t, p, inv)
	if len(p.Status.ContainerStatuses) != 1 {
		t.Fatalf("container statuses %+v", p.Status.ContainerStatuses)
	}
	_, id, _ := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
	cardDir := nodecards.SimulatedCardDir(filepath.Join(e.cfg.state, "cdi"))
	want := uint64(2*inv.Unit.MiB) << 20
	if r, ok := hookRecord(t, cardDir, dev.UUID, id); ok && (r.HardLimitBytes != want || !strings.Contains(r.Cgroup, id)) {
		t.Errorf("recorded limit %d bytes for cgroup %s, want the grant %d bytes (2 × %d MiB) for the container's cgroup", r.HardLimitBytes, r.Cgroup, want, inv.Unit.MiB)
	}
	// The pod's one container holds all the pod holds: the pod's cgroup gets the same limit.
	if r, ok := podHookRecord(t, cardDir, dev.UUID, string(p.UID)); ok && r.HardLimitBytes != want {
		t.Errorf("recorded limit %d bytes for the pod's cgroup %s, want the pod's grant %d bytes", r.HardLimitBytes, r.Cgroup, want)
	}

	// The record goes with the pod's per-allocation spec.
	deletePodAndWait(e, p.Namespace, p.Name)
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		records, err := limithook.ReadRecords(cardDir, dev.UUID)
		if err != nil {
			return false, err
		}
		for _, r := range records {
			if r.ContainerID == id {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("the limit record of container %s stayed after its pod was deleted (%s): %v", id, limithook.RecordDir(cardDir, dev.UUID), err)
	}
}

// hookRecord is gpushare-limit-hook's record for the cgroup of container id on the simulated
// card uuid (its files in cardDir); ok is false, with the test failed, when there is none.
func hookRecord(t *testing.T, cardDir, uuid, id string) (rec limithook.Record, ok bool) {
	t.Helper()
	records, err := limithook.ReadRecords(cardDir, uuid)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		if r.ContainerID == id && !r.Pod {
			t.Logf("the hook's record for container %s: %+v", id, r)
			return r, true
		}
	}
	t.Errorf("no limit recorded for container %s on card %s (%s): %+v", id, uuid, limithook.RecordDir(cardDir, uuid), records)
	return limithook.Record{}, false
}

// podHookRecord is gpushare-limit-hook's record for the cgroup of the pod with uid on the
// simulated card uuid; ok is false, with the test failed, when there is none.
func podHookRecord(t *testing.T, cardDir, uuid, uid string) (rec limithook.Record, ok bool) {
	t.Helper()
	records, err := limithook.ReadRecords(cardDir, uuid)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		pod, err := limithook.PodOf(limithook.Cgroup{Path: r.Cgroup + "/c"})
		if r.Pod && err == nil && pod.UID == uid {
			t.Logf("the hook's record for pod %s: %+v", uid, r)
			return r, true
		}
	}
	t.Errorf("no limit recorded for pod %s on card %s (%s): %+v", uid, uuid, limithook.RecordDir(cardDir, uuid), records)
	return limithook.Record{}, false
}
