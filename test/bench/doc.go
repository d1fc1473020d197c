// Package bench holds the Go benchmarks of the extender's hot paths at the scale benchmark's size
// (5000 nodes × 8 cards × 16 units, 40,000 placed pods): the filter and prioritize HTTP
// handlers with 5000 candidate names, the cache calls beneath them, and the card choice at
// bind (cache Reserve). Run with
//
//	go test -run x -bench . -benchmem ./test/bench/
//
// and compare runs with benchstat. Only exported APIs of pkg/cache, pkg/routes and
// pkg/policy are used; the cache is fed by real informers over an in-memory list.
package bench
