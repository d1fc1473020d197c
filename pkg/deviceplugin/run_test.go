package deviceplugin

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// runPlugin starts Run against a stub kubelet and waits for the first registration.
func runPlugin(t *testing.T, e *testEnv) *stubKubelet {
	t.Helper()
	k := startStubKubelet(t, e.dir)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.plugin.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	r := k.waitRegister(t, 5*time.Second)
	want := &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: socketName, ResourceName: string(gpushare.DefaultMemResource),
		Options: &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true},
	}
	if r.Version != want.Version || r.Endpoint != want.Endpoint || r.ResourceName != want.ResourceName || !r.Options.GetGetPreferredAllocationAvailable() {
		t.Fatalf("Register request = %v, want %v", r, want)
	}
	// The stub records the request before answering; wait until the plugin saw the answer.
	waitFor(t, "registration to complete", e.plugin.Registered)
	return k
}

func TestReRegistersAfterKubeletRestart(t *testing.T) {
	e := newTestEnv(t, "t4")
	k := runPlugin(t, e)

	// A kubelet restart: the old kubelet goes away, the folder is wiped (our socket with it)
	// and a new kubelet.sock appears.
	k.srv.Stop()
	entries, err := os.ReadDir(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if err := os.Remove(filepath.Join(e.dir, en.Name())); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	k2 := startStubKubelet(t, e.dir)
	k2.waitRegister(t, 2*time.Second)
	t.Logf("re-registered %v after kubelet.sock was re-created", time.Since(start))

	// The plugin serves again on a fresh socket.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := dialPlugin(t, e.dir).ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("ListAndWatch after re-registration: %v", err)
	}
	if got := len(resp.Devices); got != 14 {
		t.Errorf("ListAndWatch sent %d devices, want 14 (a T4 in GiB)", got)
	}
	select {
	case r := <-k2.reqs:
		t.Errorf("registered twice after one restart: %v", r)
	case <-time.After(300 * time.Millisecond):
	}
}

// health returns card → Health from a ListAndWatch response.
func healthOf(resp *pluginapi.ListAndWatchResponse) map[string]string {
	out := map[string]string{}
	for _, d := range resp.Devices {
		u, _, err := gpushare.ParseFakeDeviceID(d.ID)
		if err != nil {
			continue
		}
		if prev, ok := out[u]; ok && prev != d.Health {
			out[u] = "mixed"
			continue
		}
		out[u] = d.Health
	}
	return out
}

func TestHealthFaultAndRecovery(t *testing.T) {
	e := newTestEnv(t, "t4:2")
	runPlugin(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := dialPlugin(t, e.dir).ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	recv := func(what string) map[string]string {
		t.Helper()
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return healthOf(resp)
	}
	h, u := pluginapi.Healthy, pluginapi.Unhealthy
	if diff := cmp.Diff(map[string]string{uuid(0): h, uuid(1): h}, recv("initial list")); diff != "" {
		t.Fatalf("initial health (-want,+got):\n%s", diff)
	}

	// An application XID changes nothing; XID 79 on card 1 makes only card 1 unhealthy.
	if err := e.sim.InjectXID(1, 13); err != nil {
		t.Fatal(err)
	}
	if err := e.sim.InjectXID(1, 79); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{uuid(0): h, uuid(1): u}, recv("after XID 79")); diff != "" {
		t.Fatalf("health after XID 79 on card 1 (-want,+got):\n%s", diff)
	}
	waitFor(t, "node inventory marks card 1 unhealthy", func() bool {
		inv := nodeInventory(t, e)
		return len(inv.Devices) == 2 && inv.Devices[0].Healthy && !inv.Devices[1].Healthy
	})

	// Not yet: 59 s of the 1 min quiet period.
	// Waiters: the node resync ticker plus the recovery timer set after the fault.
	waitFor(t, "recovery timer", func() bool { return e.clock.Waiters() >= 2 })
	e.clock.Step(59 * time.Second)
	time.Sleep(50 * time.Millisecond)
	if !e.plugin.health.Healthy(uuid(0)) || e.plugin.health.Healthy(uuid(1)) {
		t.Fatal("card 1 recovered before the quiet period ended")
	}
	e.clock.Step(time.Second)
	if diff := cmp.Diff(map[string]string{uuid(0): h, uuid(1): h}, recv("after quiet period")); diff != "" {
		t.Fatalf("health after the quiet period (-want,+got):\n%s", diff)
	}
	waitFor(t, "node inventory marks card 1 healthy again", func() bool {
		inv := nodeInventory(t, e)
		return len(inv.Devices) == 2 && inv.Devices[1].Healthy
	})
}

func nodeInventory(t *testing.T, e *testEnv) gpushare.Inventory {
	t.Helper()
	node, err := e.client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, ok := node.Annotations[gpushare.AnnotationNodeInventory]
	if !ok {
		return gpushare.Inventory{}
	}
	inv, err := gpushare.ParseInventory(s)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestServesAgainWhenItsSocketIsDeleted(t *testing.T) {
	e := newTestEnv(t, "t4")
	k := runPlugin(t, e)
	if err := os.Remove(filepath.Join(e.dir, socketName)); err != nil {
		t.Fatal(err)
	}
	// Kubelet lost its connection to the old socket: the plugin serves anew and registers.
	k.waitRegister(t, 2*time.Second)
	waitFor(t, "registration to complete", e.plugin.Registered)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := dialPlugin(t, e.dir).GetDevicePluginOptions(ctx, &pluginapi.Empty{}); err != nil {
		t.Fatalf("plugin not serving after its socket was deleted: %v", err)
	}
}
