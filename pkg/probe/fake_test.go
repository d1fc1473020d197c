package probe

import (
	"fmt"
	"testing"
)

// fakeDriver is a Driver over made-up cards: each refuses allocations once limitMiB[i] MiB
// are held, and reports free/total as given. It records what is still allocated.
type fakeDriver struct {
	devs     []Device
	free     []int64
	limitMiB []int64
	allocErr error
	held     map[int]int64
	next     uint64
}

func (f *fakeDriver) Devices() ([]Device, error) { return f.devs, nil }

func (f *fakeDriver) MemInfo(card int) (int64, int64, error) {
	return f.free[card], f.devs[card].TotalMiB, nil
}

func (f *fakeDriver) Alloc(card int, mib int64) (Block, error) {
	if f.allocErr != nil {
		return Block{}, f.allocErr
	}
	if f.held == nil {
		f.held = map[int]int64{}
	}
	if f.held[card]+mib > f.limitMiB[card] {
		return Block{}, ErrOutOfMemory
	}
	f.held[card] += mib
	f.next++
	return Block{Card: card, Ptr: f.next, MiB: mib}, nil
}

func (f *fakeDriver) Free(b Block) error {
	if f.held[b.Card] < b.MiB {
		return fmt.Errorf("freeing %d MiB, %d held", b.MiB, f.held[b.Card])
	}
	f.held[b.Card] -= b.MiB
	return nil
}

func (f *fakeDriver) Close() error { return nil }

// leaked fails t when a block is still held.
func (f *fakeDriver) leaked(t *testing.T) {
	t.Helper()
	for card, mib := range f.held {
		if mib != 0 {
			t.Errorf("card %d: %d MiB still allocated", card, mib)
		}
	}
}

func open(d Driver) func() (Driver, error) {
	return func() (Driver, error) { return d, nil }
}

func noDriver() (Driver, error) {
	return nil, fmt.Errorf("%w: loading libcuda.so.1: not found", ErrNoDriver)
}
