package mps

import (
	"fmt"
	"regexp"
	"strconv"
)

// Cap is what one control daemon holds each of its client processes to: pinned device memory
// in MiB (set_default_device_pinned_mem_limit) and the active thread percentage, the share of
// the card's SMs a client may use (set_default_active_thread_percentage; 100 leaves compute
// uncapped).
type Cap struct {
	PinnedMemMiB    int64 `json:"pinnedMemMiB"`
	ActiveThreadPct int   `json:"activeThreadPct"`
}

// MaxPinnedMemMiB bounds a cap's memory: 16 TiB, far above any card, so a cap name stays short
// and a corrupted want cannot ask for an absurd value.
const MaxPinnedMemMiB = 16 << 20

// Validate says whether c is a cap a daemon can be given: memory 1..MaxPinnedMemMiB MiB and a
// thread percentage of 1..100.
func (c Cap) Validate() error {
	if c.PinnedMemMiB < 1 || c.PinnedMemMiB > MaxPinnedMemMiB {
		return fmt.Errorf("MPS cap: pinned memory %d MiB, want 1..%d", c.PinnedMemMiB, MaxPinnedMemMiB)
	}
	if c.ActiveThreadPct < 1 || c.ActiveThreadPct > 100 {
		return fmt.Errorf("MPS cap: active thread percentage %d, want 1..100", c.ActiveThreadPct)
	}
	return nil
}

// Name is the cap's folder name, m<MiB>-t<percent>: one name per cap, so clients with the same
// cap on a card find the same daemon.
func (c Cap) Name() string {
	return "m" + strconv.FormatInt(c.PinnedMemMiB, 10) + "-t" + strconv.Itoa(c.ActiveThreadPct)
}

var capName = regexp.MustCompile(`^m([1-9][0-9]{0,7})-t([1-9][0-9]{0,2})$`)

// ParseCapName is Name's inverse. Errors: a name not of Name's form or a cap Validate refuses.
func ParseCapName(s string) (Cap, error) {
	m := capName.FindStringSubmatch(s)
	if m == nil {
		return Cap{}, fmt.Errorf("MPS cap folder %q: want m<MiB>-t<percent>", s)
	}
	mem, _ := strconv.ParseInt(m[1], 10, 64)
	pct, _ := strconv.Atoi(m[2])
	c := Cap{PinnedMemMiB: mem, ActiveThreadPct: pct}
	return c, c.Validate()
}

// MemLimitArg is the value the control daemon's set_default_device_pinned_mem_limit takes:
// MiB with the M suffix.
func (c Cap) MemLimitArg() string { return strconv.FormatInt(c.PinnedMemMiB, 10) + "M" }
