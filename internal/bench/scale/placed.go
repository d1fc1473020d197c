package scale

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/internal/bench/metrics"
	"github.com/gpushare/gpushare/internal/bench/parallel"
)

// MemoryResult is the extender's footprint with many placed pods.
type MemoryResult struct {
	Nodes  int `json:"nodes"`
	Placed int `json:"placed"`
	// CreateSeconds: creating the placed pods; LoadSeconds: first create until the
	// extender's cache held all their units.
	CreateSeconds float64 `json:"createSeconds"`
	LoadSeconds   float64 `json:"loadSeconds"`
	// After the cache held them and `settle` passed:
	RSSMiB       float64 `json:"rssMiB"`
	HWMMiB       float64 `json:"hwmMiB"`
	HeapInuseMiB float64 `json:"heapInuseMiB"`
	HeapAllocMiB float64 `json:"heapAllocMiB"`
	GoSysMiB     float64 `json:"goSysMiB"`
	CPUSeconds   float64 `json:"cpuSeconds"` // extender CPU time since it started
	LoadAfter    string  `json:"loadAfter"`
}

// placedUnits is each placed pod's size: half a card, so the cards are realistically
// partly used and no pod is refused.
func (b *Bench) placedUnits() int64 { return b.Objects.CardUnits / 2 }

// CreatePlaced creates `count` pods already bound (spec.nodeName at create) with their
// allocation annotations, spread over nodes NodeName(0..nodes-1) card by card: pod i sits
// on node (i / Cards) mod nodes, card i mod Cards. The scheduler is not involved.
func (b *Bench) CreatePlaced(ctx context.Context, nodes, count int) (time.Duration, error) {
	if nodes <= 0 {
		return 0, fmt.Errorf("placed pods need at least one node, got %d", nodes)
	}
	if max := nodes * b.Objects.Cards * int(b.Objects.CardUnits/b.placedUnits()); count > max {
		return 0, fmt.Errorf("%d placed pods of %d units do not fit on %d nodes (at most %d)", count, b.placedUnits(), nodes, max)
	}
	now := time.Now()
	start := time.Now()
	klog.InfoS("creating placed pods", "count", count, "workers", b.workers())
	err := parallel.ForEach(ctx, count, b.workers(), func(ctx context.Context, i int) error {
		node := NodeName((i / b.Objects.Cards) % nodes)
		pod := b.Objects.PlacedPod(i, node, i%b.Objects.Cards, b.placedUnits(), now)
		if err := b.createPod(ctx, pod); err != nil {
			return err
		}
		if i > 0 && i%5000 == 0 {
			klog.InfoS("placed pods created", "count", i)
		}
		return nil
	})
	return time.Since(start), err
}

// RunMemory creates the placed pods, waits until the extender's cache holds all their
// units (the sum of gpushare_card_allocated_units; no other pod may hold units), waits
// settle, and reads the extender's footprint. Errors: API or probe failures, timeout.
func (b *Bench) RunMemory(ctx context.Context, nodes, count int, probe *ExtenderProbe, timeout, settle time.Duration) (MemoryResult, error) {
	res := MemoryResult{Nodes: nodes, Placed: count}
	start := time.Now()
	took, err := b.CreatePlaced(ctx, nodes, count)
	if err != nil {
		return res, err
	}
	res.CreateSeconds = took.Seconds()
	want := float64(int64(count) * b.placedUnits())
	deadline := time.Now().Add(timeout)
	for {
		s, _, err := probe.read(ctx)
		if err != nil {
			return res, err
		}
		got := s.Values[metrics.AllocatedUnits]
		if got >= want {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("after %s the extender holds %.0f of %.0f placed units", timeout, got, want)
		}
		klog.InfoS("waiting for the extender to load the placed pods", "units", got, "want", want)
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
	res.LoadSeconds = time.Since(start).Seconds()
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(settle):
	}
	return b.readFootprint(ctx, res, probe)
}

// Footprint reads the extender's memory now (e.g. after a restart with the placed pods
// already there), without creating anything.
func (b *Bench) Footprint(ctx context.Context, nodes, count int, probe *ExtenderProbe) (MemoryResult, error) {
	return b.readFootprint(ctx, MemoryResult{Nodes: nodes, Placed: count}, probe)
}

func (b *Bench) readFootprint(ctx context.Context, res MemoryResult, probe *ExtenderProbe) (MemoryResult, error) {
	// /proc first: rendering /metrics (two series per card) allocates, and that garbage
	// would count in RSS.
	ps, err := readProc(probe.PID)
	if err != nil {
		return res, err
	}
	s, _, err := probe.read(ctx)
	if err != nil {
		return res, err
	}
	res.RSSMiB, res.HWMMiB, res.CPUSeconds = mib(ps.RSSBytes), mib(ps.HWMBytes), ps.CPUSeconds
	res.HeapInuseMiB = s.Values[metrics.HeapInuse] / (1 << 20)
	res.HeapAllocMiB = s.Values[metrics.HeapAlloc] / (1 << 20)
	res.GoSysMiB = s.Values[metrics.Sys] / (1 << 20)
	res.LoadAfter = loadAvg()
	return res, nil
}
