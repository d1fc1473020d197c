// Package metrics reads the gpushare extender's /metrics for the benchmarks and turns its
// latency histograms into Latency figures: one scrape before a run, one after, and the
// difference is what the run cost.
package metrics

// Names on the extender's /metrics (pkg/metrics and the Go collector) that the benchmarks read.
const (
	FilterSeconds     = "gpushare_filter_duration_seconds"
	PrioritizeSeconds = "gpushare_prioritize_duration_seconds"
	BindSeconds       = "gpushare_bind_duration_seconds"
	// AllocatedUnits summed over all cards: the units the extender's cache holds.
	AllocatedUnits = "gpushare_card_allocated_units"
	// BindFailures summed over its reasons.
	BindFailures = "gpushare_bind_failures_total"
	HeapInuse    = "go_memstats_heap_inuse_bytes"
	HeapAlloc    = "go_memstats_heap_alloc_bytes"
	Sys          = "go_memstats_sys_bytes"
)
