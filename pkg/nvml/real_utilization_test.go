//go:build cgo && nvml

package nvml

import (
	"errors"
	"testing"
)

// TestRealProcessUtilization reads each card's per-process utilisation from the driver twice
// (the second call asks only for samples newer than the first's): each answer has one entry
// per PID in ascending order, percentages within 0..100. It skips without a driver, and per
// card when the card does not report per-process utilisation. Run a CUDA load beside it to
// see figures: `go test -tags nvml ./pkg/nvml -run RealProcessUtilization -v`.
func TestRealProcessUtilization(t *testing.T) {
	c, err := New(SystemLibrary(""))
	if err != nil {
		t.Skipf("no NVIDIA driver here: %v", err)
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
	for _, d := range devs {
		for call := 0; call < 2; call++ {
			util, err := c.ProcessUtilization(d.Index)
			if errors.Is(err, ErrUtilizationUnsupported) {
				t.Logf("card %d (%s): %v", d.Index, d.Model, err)
				break
			}
			if err != nil {
				t.Errorf("card %d call %d: %v", d.Index, call, err)
				break
			}
			var last uint32
			for i, u := range util {
				t.Logf("card %d call %d: pid %d SM %d%% memory %d%%", d.Index, call, u.PID, u.SMPercent, u.MemPercent)
				if u.PID == 0 || (i > 0 && u.PID <= last) {
					t.Errorf("card %d call %d: PID %d zero, repeated or out of order", d.Index, call, u.PID)
				}
				if u.SMPercent > 100 || u.MemPercent > 100 {
					t.Errorf("card %d call %d: pid %d SM %d%% memory %d%%: above 100", d.Index, call, u.PID, u.SMPercent, u.MemPercent)
				}
				last = u.PID
			}
		}
	}
}
