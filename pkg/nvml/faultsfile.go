package nvml

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// XIDInjector raises XID events on simulated cards (Simulator implements it).
type XIDInjector interface {
	InjectXID(index int, xid uint64) error
}

// ParseFaults parses the faults file: card indexes separated by commas, blanks or newlines;
// '#' starts a comment. An empty or missing file means no fault.
func ParseFaults(s string) ([]int, error) {
	var out []int
	for _, line := range strings.Split(s, "\n") {
		line, _, _ = strings.Cut(line, "#")
		for _, f := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' }) {
			i, err := strconv.Atoi(f)
			if err != nil || i < 0 {
				return nil, fmt.Errorf("faults file: %q is not a card index", f)
			}
			out = append(out, i)
		}
	}
	return out, nil
}

// WatchFaultsFile injects XIDFallenOffBus on every card listed in path, every period, until
// ctx is done. A card stays faulty while it is listed and recovers after the plugin's quiet
// period once it is removed. Read errors other than a missing file are logged.
func WatchFaultsFile(ctx context.Context, path string, period time.Duration, sim XIDInjector) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		injectListed(path, sim)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func injectListed(path string, sim XIDInjector) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		klog.ErrorS(err, "Reading simulated faults file", "path", path)
		return
	}
	cards, err := ParseFaults(string(b))
	if err != nil {
		klog.ErrorS(err, "Parsing simulated faults file", "path", path)
		return
	}
	for _, i := range cards {
		if err := sim.InjectXID(i, XIDFallenOffBus); err != nil {
			klog.ErrorS(err, "Injecting simulated fault", "path", path)
		}
	}
}
