//go:build cgo && nvml

// Tests against the driver's real NVML library. They run only with `-tags nvml` on a machine
// with an NVIDIA GPU and driver: `go test -tags nvml ./pkg/nvml -run Real -v`.
package nvml

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

func TestRealNVML(t *testing.T) {
	c, err := New(SystemLibrary(""))
	if err != nil {
		t.Fatalf("opening the driver's NVML: %v", err)
	}
	defer func() {
		if err := c.Shutdown(); err != nil {
			t.Error(err)
		}
	}()
	devs, err := c.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) == 0 {
		t.Fatal("NVML reports no devices")
	}
	for i, d := range devs {
		t.Logf("card %d: %s %s %d MiB = %d GiB units", d.Index, d.UUID, d.Model, d.MemoryMiB, gpushare.GiB.UnitsOf(d.MemoryMiB))
		if d.Index != i {
			t.Errorf("device %d has index %d", i, d.Index)
		}
		if !strings.HasPrefix(d.UUID, "GPU-") {
			t.Errorf("card %d: UUID %q does not start with GPU-", i, d.UUID)
		}
		if d.Model == "" || d.MemoryMiB < 1024 {
			t.Errorf("card %d: implausible model %q / %d MiB", i, d.Model, d.MemoryMiB)
		}
		// The per-allocation CDI spec names /dev/nvidia<minor>: it must be this card's node.
		node := "/dev/nvidia" + strconv.Itoa(d.Minor)
		if _, err := os.Stat(node); d.Minor < 0 || err != nil {
			t.Errorf("card %d: minor number %d, device node %s: %v", i, d.Minor, node, err)
		}
		used, err := c.UsedMemoryMiB(d.Index)
		if err != nil {
			t.Errorf("card %d used memory: %v", i, err)
		}
		if used < 0 || used > d.MemoryMiB {
			t.Errorf("card %d: used %d MiB of %d", i, used, d.MemoryMiB)
		}
		// The usage watchdog's listing: compute and graphics, one entry per PID, each
		// process's memory no larger than the card (or unknown).
		procs, err := c.Processes(d.Index)
		if err != nil {
			t.Errorf("card %d processes: %v", i, err)
		}
		seen := map[uint32]bool{}
		for _, p := range procs {
			t.Logf("card %d: pid %d used %d bytes (known %v)", i, p.PID, p.UsedBytes, p.UsedKnown)
			if seen[p.PID] || p.PID == 0 {
				t.Errorf("card %d: PID %d listed twice or zero", i, p.PID)
			}
			seen[p.PID] = true
			if p.UsedKnown && p.UsedBytes > uint64(d.MemoryMiB)<<20 {
				t.Errorf("card %d: pid %d uses %d bytes, more than the card's %d MiB", i, p.PID, p.UsedBytes, d.MemoryMiB)
			}
		}
	}

	// The XID watch must set up on real hardware and end cleanly when its context does.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	faults := make(chan Fault, 16)
	if err := c.WatchFaults(ctx, faults); err != nil {
		t.Fatalf("WatchFaults: %v", err)
	}
	select {
	case f := <-faults:
		t.Logf("a fault arrived during the test (not an error by itself): %+v", f)
	default:
	}
}
