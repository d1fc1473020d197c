package probe

import (
	"errors"
	"fmt"
)

// Measurement is what stepwise allocation found on one card. Memory in MiB.
type Measurement struct {
	UUID string `json:"uuid"`
	// FreeMiB and TotalMiB are what the driver reported before the first block.
	FreeMiB  int64 `json:"freeMiB"`
	TotalMiB int64 `json:"totalMiB"`
	// AllocatedMiB is the most device memory held at once.
	AllocatedMiB int64 `json:"allocatedMiB"`
	// BoundMiB is where allocation stops by itself (the grant and two units), StepMiB the size
	// of each block.
	BoundMiB int64 `json:"boundMiB"`
	StepMiB  int64 `json:"stepMiB"`
	// OutOfMemory: the driver refused a block for lack of memory before the bound.
	OutOfMemory bool `json:"outOfMemory,omitempty"`
	// Err is another error that stopped the measurement (reading memory, allocating, freeing).
	Err string `json:"error,omitempty"`
}

// measure allocates blocks of stepMiB MiB (the last one smaller, to land on the bound) on
// card until boundMiB MiB are held or the driver refuses one, then frees every block it got,
// whatever happened. The bound keeps the probe from taking a shared card's memory from its
// neighbours where nothing limits it.
func measure(d Driver, card int, uuid string, boundMiB, stepMiB int64) (m Measurement) {
	m = Measurement{UUID: uuid, BoundMiB: boundMiB, StepMiB: stepMiB}
	free, total, err := d.MemInfo(card)
	if err != nil {
		m.Err = fmt.Sprintf("reading the card's memory: %v", err)
		return m
	}
	m.FreeMiB, m.TotalMiB = free, total
	var blocks []Block
	defer func() {
		for _, b := range blocks {
			if err := d.Free(b); err != nil && m.Err == "" {
				m.Err = fmt.Sprintf("freeing a block of %d MiB: %v", b.MiB, err)
			}
		}
	}()
	for m.AllocatedMiB < boundMiB {
		size := min(stepMiB, boundMiB-m.AllocatedMiB)
		b, err := d.Alloc(card, size)
		if errors.Is(err, ErrOutOfMemory) {
			m.OutOfMemory = true
			break
		}
		if err != nil {
			m.Err = fmt.Sprintf("allocating %d MiB after %d MiB: %v", size, m.AllocatedMiB, err)
			break
		}
		blocks = append(blocks, b)
		m.AllocatedMiB += size
	}
	return m
}

// stepFor is the block size for a unit of unitMiB: a quarter unit, so the amount allocated is
// known to a quarter of a unit, and at least 1 MiB.
func stepFor(unitMiB int64) int64 { return max(unitMiB/4, 1) }
