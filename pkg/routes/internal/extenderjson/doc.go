// Package extenderjson decodes the scheduler's ExtenderArgs and encodes the filter and
// prioritize answers (ExtenderFilterResult, HostPriorityList) for pkg/routes, with the
// results encoding/json gives (FuzzDecodeArgs and the encoder tests hold it to that), but
// without running most of a call through reflection: a call for 5000 nodes is mostly node
// names. DecodeArgs cuts the names out of one copy of the array and leaves only the pod to
// encoding/json; the encoders append plain strings directly.
//
// Why our own code rather than a library: the filter and prioritize handlers run on every
// scheduling cycle with the node list of the whole cluster, and the best library version
// (github.com/go-json-experiment/json with a jsontext-based name cutter and token-by-token
// encoders) costs more CPU time and bytes per call than this package, beyond what the
// project allows for a library. The comparison, its method and its figures are in
// docs/design/benchmarks.md; BenchmarkFilterHandler and BenchmarkPrioritizeHandler (test/bench) and
// BenchmarkFilter5000Nodes (pkg/routes) rerun it.
package extenderjson
