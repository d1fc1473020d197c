package dra

import (
	"context"
	"sync"

	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// faultLog remembers each card's latest critical XID, which decides its taint's effect,
// and passes every fault on to the health tracker.
type faultLog struct {
	uuids []string

	mu      sync.Mutex
	lastXID map[string]uint64
}

func newFaultLog(uuids []string) *faultLog {
	return &faultLog{uuids: uuids, lastXID: map[string]uint64{}}
}

// record notes f: for its card, or for every card when NVML could not tell which.
func (l *faultLog) record(f gpunvml.Fault) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, u := range l.uuids {
		if f.UUID == "" || f.UUID == u {
			l.lastXID[u] = f.XID
		}
	}
}

// snapshot is a copy of the latest XIDs by UUID.
func (l *faultLog) snapshot() map[string]uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]uint64, len(l.lastXID))
	for u, x := range l.lastXID {
		out[u] = x
	}
	return out
}

// relay records each fault from in and forwards it to out until ctx is done. The fault is
// recorded before the health tracker sees it, so the slice built on its change names it.
func (l *faultLog) relay(ctx context.Context, in <-chan gpunvml.Fault, out chan<- gpunvml.Fault) {
	for {
		select {
		case <-ctx.Done():
			return
		case f := <-in:
			l.record(f)
			select {
			case out <- f:
			case <-ctx.Done():
				return
			}
		}
	}
}
