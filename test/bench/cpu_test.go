package bench

import (
	"syscall"
	"testing"
	"time"
)

// cpuClock measures the CPU time the whole process spends (user and system, every thread,
// the garbage collector's included) from start to perOp. On a shared machine the wall time
// per op of a benchmark depends on the other load; its CPU time much less so.
type cpuClock struct{ start time.Duration }

func startCPU(b *testing.B) cpuClock {
	b.Helper()
	return cpuClock{start: processCPU(b)}
}

// report adds the CPU time per iteration as the metric cpu-ns/op.
func (c cpuClock) report(b *testing.B) {
	b.Helper()
	b.ReportMetric(float64(processCPU(b)-c.start)/float64(b.N), "cpu-ns/op")
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
