// Package extenderjson decodes the scheduler's ExtenderArgs and encodes the filter and
// prioritize answers (ExtenderFilterResult, HostPriorityList) for pkg/routes, with the
// results encoding/json gives (FuzzDecodeArgs and the encoder tests hold it to that), but
// without running most of a call through reflection: a call for 5000 nodes is mostly node
// names. DecodeArgs cuts the names out of one copy of the array and leaves only the pod to
// encoding/json; the encoders append plain strings directly.
//
// Why our own code rather than a library: measured on 2026-11-23 against the best library
// version we could write, github.com/go-json-experiment/json v1.27.2 (Unmarshal with
// jsonv1.DefaultOptionsV1 plus a jsontext-based unmarshaler that cuts a []string from one
// allocation; both answers written token by token with jsontext.Encoder), the library took
// 1.42× this package's CPU per prioritize call (cpu-ns/op, p=0.004), 1.5–1.85× its wall time
// on three of the five filter and prioritize benchmarks where the difference was
// significant, and 1.15–2.25× its B/op (allocs/op about equal): over the 1.2× the project
// allows for a library. jsonv1.Unmarshal and jsonv1.Marshal as they are were slower still
// (6230 allocs/op instead of 858 for BenchmarkFilter5000Nodes). Both versions built as test
// binaries and run alternately on the same shared 2-core machine:
//
//	go test -c -o kept-bench.test ./test/bench   # and lib-bench.test with the library
//	for i in $(seq 8); do for t in kept lib; do (cd test/bench && ../../$t-bench.test \
//	  -test.run '^$' -test.bench 'FilterHandler|PrioritizeHandler' -test.benchmem \
//	  -test.count 1 | grep ^Benchmark >>../../$t.txt); done; done
//	benchstat kept.txt lib.txt
//
// (the same for ./pkg/routes with -test.bench Filter5000Nodes).
package extenderjson
