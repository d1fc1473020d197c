package bench

import (
	"runtime"
	"testing"
)

// BenchmarkLiveHeap reports the live heap (MiB, after a full GC) of the cache, its
// informer stores and the handler at 5000 nodes and 40,000 placed pods: the Go part of the
// extender's RSS target (≤ 100 MiB). Bench nodes carry no managedFields, so a real
// cluster's node store is somewhat larger. The loop only measures; ns/op is meaningless.
func BenchmarkLiveHeap(b *testing.B) {
	c := getCluster(b)
	var ms runtime.MemStats
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&ms)
	}
	runtime.KeepAlive(c)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "live-MiB")
	b.ReportMetric(float64(ms.HeapAlloc)/float64(numPlaced), "B/placed-pod")
}
