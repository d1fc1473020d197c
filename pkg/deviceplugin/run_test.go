package deviceplugin

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
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
	waitFor(t, "registration to complete", e.plugin.registered)
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
	k2 := startStubKubelet(t, e.dir)
	e.waitRegisterSettled(t, k2)

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
}

// waitRegisterSettled steps the fake clock by settleDelay until the plugin registers with k
// (the folder's events arrive on their own time; the settle timer runs on the fake clock).
func (e *testEnv) waitRegisterSettled(t *testing.T, k *stubKubelet) *pluginapi.RegisterRequest {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		select {
		case r := <-k.reqs:
			return r
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("plugin did not register again")
		}
		e.clock.Step(settleDelay)
	}
}

// TestWatchFolderSettlesABurst: a kubelet restart's burst of folder events (our socket
// removed, kubelet.sock created, maybe twice) leads to one settle timer, and to one ensure
// once it fires. Each event is handed over an unbuffered channel, so the loop has handled it
// when the send returns; the fake clock's waiters are then the loop's timers exactly.
func TestWatchFolderSettlesABurst(t *testing.T) {
	e := newTestEnv(t, "t4")
	p := e.plugin
	events := make(chan fsnotify.Event)
	ensured := make(chan struct{}, 8)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.watchFolder(ctx, events, nil, func() { ensured <- struct{}{} })
	}()
	defer func() { cancel(); <-done }()
	barrier := fsnotify.Event{Name: filepath.Join(e.dir, "unrelated"), Op: fsnotify.Write}
	for _, ev := range []fsnotify.Event{
		{Name: p.socketPath(), Op: fsnotify.Remove},
		{Name: p.kubeletPath(), Op: fsnotify.Create},
		{Name: p.kubeletPath(), Op: fsnotify.Create},
		barrier,
	} {
		events <- ev
	}
	// The socketCheck ticker and one settle timer.
	if got := e.clock.Waiters(); got != 2 {
		t.Fatalf("%d clock waiters after the burst, want 2 (ticker, one settle timer)", got)
	}
	e.clock.Step(settleDelay)
	select {
	case <-ensured:
	case <-time.After(5 * time.Second):
		t.Fatal("the settle timer fired but ensure was not called")
	}
	events <- barrier // the loop is past the settle
	if got := e.clock.Waiters(); got != 1 {
		t.Errorf("%d clock waiters after the settle, want 1 (the ticker)", got)
	}
	if n := len(ensured); n != 0 {
		t.Errorf("%d more ensures after one burst, want none", n)
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

	// Not yet: 59 s of the 1 min quiet period. Waiters: the node resync, allocation record
	// and socket check tickers, plus the recovery timer set after the fault.
	waitFor(t, "recovery timer", func() bool { return e.clock.Waiters() >= 4 })
	e.clock.Step(59 * time.Second)
	// The recovery timer has not fired: card 1 is still unhealthy (nodecards'
	// TestHealthQuietPeriod runs the recovery itself one second early).
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
	e.waitRegisterSettled(t, k)
	waitFor(t, "registration to complete", e.plugin.registered)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := dialPlugin(t, e.dir).GetDevicePluginOptions(ctx, &pluginapi.Empty{}); err != nil {
		t.Fatalf("plugin not serving after its socket was deleted: %v", err)
	}
}
