//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// reservedEnvPolicy is deploy/admission's policy refusing pods that set the variables
// through which a container is given its cards and grant.
const reservedEnvPolicy = "gpushare-reserved-env"

// cudaVisibleDevices is the cards CUDA uses; the cdi-allocation spec sets it.
const cudaVisibleDevices = "CUDA_VISIBLE_DEVICES"

// tenantGPUEnv is what a hostile tenant puts in its container's env to widen a 1-unit grant:
// every card of the node, two CUDA devices and the whole card's units.
var tenantGPUEnv = []corev1.EnvVar{
	{Name: gpushare.EnvVisibleDevices, Value: "all"},
	{Name: cudaVisibleDevices, Value: "0,1"},
	{Name: gpushare.EnvContainerUnits, Value: "14"},
}

// CaseCDIAllocationEnvLoses: a pod requesting 1 unit that sets NVIDIA_VISIBLE_DEVICES=all,
// CUDA_VISIBLE_DEVICES=0,1 and ALIYUN_COM_GPU_MEM_CONTAINER=14 in its own env is refused at
// admission in a tenant namespace, naming the variable. In kube-system, which the policy
// exempts, it runs on the real node (containerd with CDI, two simulated T4s) under
// share-plugin's cdi-allocation strategy and its container sees exactly its card and its
// grant, each variable once, with the values of the per-allocation CDI spec: the runtime
// applies the spec's env after the pod's. Its card comes from the simulated cards' CDI
// device (<kind>=<UUID>, named before the allocation's, as NVIDIA's spec would be), mounted
// exactly once. The spec is removed when the pod is deleted.
func CaseCDIAllocationEnvLoses(t *testing.T, e *Env) {
	requireRealNode(t, e)
	requireBinary(t, e, "extender", "share-plugin")
	ctx := testContext(t, 5*time.Minute)

	ns := newNamespace(t, e)
	refused := gpuPod(ns, "tenant", e.RealNode, ctr{units: 1})
	refused.Spec.Containers[0].Env = tenantGPUEnv
	var err error
	waitErr := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err = e.Client.CoreV1().Pods(ns).Create(ctx, refused, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil, nil
	})
	if waitErr != nil {
		t.Fatalf("a pod setting %v was admitted in %s: the policy %s is not enforced", tenantGPUEnv, ns, reservedEnvPolicy)
	}
	wantRefused(t, "pod setting "+gpushare.EnvVisibleDevices, err, `container "c0" sets `+gpushare.EnvVisibleDevices)

	inv := restartSharePlugin(ctx, t, e, "t4:2", "GPUSHARE_DEVICE_LIST_STRATEGY=cdi-allocation")
	p := gpuPod(metav1.NamespaceSystem, "e2e-cdi-tenant-"+rand.String(5), e.RealNode, ctr{units: 1})
	p.Spec.Containers[0].Env = tenantGPUEnv
	createPod(t, e, p)
	t.Cleanup(func() { deletePodAndWait(e, p.Namespace, p.Name) })
	p = waitPod(t, e, p.Namespace, p.Name, 2*time.Minute, "Running", isRunning)
	alloc, ok, err := res.ReadAllocation(p)
	if err != nil || !ok {
		t.Fatalf("allocation %v ok=%v err=%v", alloc, ok, err)
	}
	cards := alloc.For(gpushare.ContainerRef{Index: 0})
	if len(cards) != 1 {
		t.Fatalf("a 1-unit container was placed on cards %v", cards)
	}
	var uuid string
	for idx := range cards {
		dev, ok := inv.Device(idx)
		if !ok {
			t.Fatalf("card %d not in the inventory %+v", idx, inv)
		}
		uuid = dev.UUID
	}
	logs := containerLogs(t, e, p.Namespace, p.Name, "c0")
	t.Logf("the container's GPU environment:\n%s", logs)
	wantEnvOnce(t, logs, map[string]string{
		"GPUSHARE_SIMULATED_GPUS":  uuid,
		gpushare.EnvVisibleDevices: uuid,
		cudaVisibleDevices:         uuid,
		gpushare.EnvContainerUnits: "1",
	})

	cardPath := gpushare.SimulatedGPUDir + "/" + uuid
	if n := mountsAt(t, containerPID(t, string(p.UID), "gpuenv"), cardPath); n != 1 {
		t.Errorf("the container has %d mounts at %s, want exactly one", n, cardPath)
	}

	specs := filepath.Join(e.cfg.state, "cdi", "gpushare.io-allocation_"+string(p.UID)+"_*.json")
	if m, _ := filepath.Glob(specs); len(m) != 1 {
		t.Errorf("per-allocation CDI specs of the pod: %v, want one (%s)", m, specs)
	}
	deletePodAndWait(e, p.Namespace, p.Name)
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		m, _ := filepath.Glob(specs)
		return len(m) == 0, nil
	})
	if err != nil {
		t.Errorf("the pod's per-allocation CDI spec stayed after the pod was deleted (%s)", specs)
	}
}

// mountsAt counts the mounts of process pid's mount namespace whose mount point is path
// (/proc/<pid>/mountinfo, field 5).
func mountsAt(t *testing.T, pid uint32, path string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatalf("reading the container's mounts: %v", err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == path {
			n++
		}
	}
	return n
}

// deletePodAndWait deletes a pod at once and waits up to 30 s for it to be gone, so that a
// pod outside a test's namespace does not outlive the test.
func deletePodAndWait(e *Env, ns, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	zero := int64(0)
	_ = e.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err != nil, nil
	})
}
