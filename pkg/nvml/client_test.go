package nvml

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func newSimClient(t *testing.T, spec string) (*Simulator, Interface) {
	t.Helper()
	cards, err := ParseSimSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	sim, err := NewSimulator("node-1", cards)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(sim.Library())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown() })
	return sim, c
}

func TestClientDevicesOverSimulator(t *testing.T) {
	_, c := newSimClient(t, "t4,a100-80gb")
	got, err := c.Devices()
	if err != nil {
		t.Fatal(err)
	}
	want := []Device{
		{Index: 0, UUID: SimulatedUUID("node-1", 0), Model: "Tesla T4", MemoryMiB: 15079, Minor: 0},
		{Index: 1, UUID: SimulatedUUID("node-1", 1), Model: "NVIDIA A100-SXM4-80GB", MemoryMiB: 81920, Minor: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Devices (-want,+got):\n%s", diff)
	}
	if used, err := c.UsedMemoryMiB(1); err != nil || used != 0 {
		t.Errorf("UsedMemoryMiB(1) = %d, %v; want 0, nil", used, err)
	}
	if _, err := c.UsedMemoryMiB(2); err == nil {
		t.Error("UsedMemoryMiB(2) on a 2-card node: want an error")
	}
}

func TestWatchFaultsSkipsApplicationXIDs(t *testing.T) {
	sim, c := newSimClient(t, "t4:2")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan Fault, 4)
	done := make(chan error, 1)
	go func() { done <- c.WatchFaults(ctx, out) }()

	for _, x := range []struct {
		card int
		xid  uint64
	}{{0, 13}, {0, 31}, {1, 43}, {1, 79}} {
		if err := sim.InjectXID(x.card, x.xid); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case f := <-out:
		want := Fault{UUID: SimulatedUUID("node-1", 1), XID: 79}
		if diff := cmp.Diff(want, f); diff != "" {
			t.Errorf("first fault (-want,+got):\n%s", diff)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no fault reported for XID 79")
	}
	select {
	case f := <-out:
		t.Errorf("unexpected fault %+v", f)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("WatchFaults returned %v after cancel, want nil", err)
	}
	if err := sim.InjectXID(2, 79); err == nil {
		t.Error("InjectXID on a missing card: want an error")
	}
}

func TestWatchFaultsFile(t *testing.T) {
	sim, c := newSimClient(t, "t4:3")
	path := filepath.Join(t.TempDir(), "faults")
	if err := os.WriteFile(path, []byte("2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan Fault, 16)
	go func() { _ = c.WatchFaults(ctx, out) }()
	go WatchFaultsFile(ctx, path, 10*time.Millisecond, sim)
	select {
	case f := <-out:
		if want := (Fault{UUID: SimulatedUUID("node-1", 2), XID: XIDFallenOffBus}); f != want {
			t.Errorf("fault = %+v, want %+v", f, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("listing card 2 in the faults file raised no fault")
	}
}
