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
// allocation; both answers written token by token with jsontext.Encoder), the library
// took 1.56× and 1.72× this package's CPU time per filter call with 5000 NodeNames
// (cpu-ns/op, test/bench BenchmarkFilterHandler 2cards-8u and 1card-4u, p≤0.002; 1card-14u,
// dominated by the failure reasons, not significant) and 1.25–1.41× per prioritize call
// (BenchmarkPrioritizeHandler, p≤0.001), with 1.15–2.25× the B/op (allocs/op about equal);
// wall time per op was too noisy on the shared machine to tell apart (geomean 1.20×, no
// benchmark significant). That is over the 1.2× the project allows for a library.
// jsonv1.Unmarshal and jsonv1.Marshal as they are were slower still (6230 allocs/op
// instead of 858 for BenchmarkFilter5000Nodes). Both versions were built as test binaries
// and run alternately on the same shared 2-core machine:
//
//	go test -c -o kept-bench.test ./test/bench   # and lib-bench.test with the library
//	for i in $(seq 8); do for t in kept lib; do (cd test/bench && ../../$t-bench.test \
//	  -test.run '^$' -test.bench 'FilterHandler|PrioritizeHandler' -test.benchmem \
//	  -test.count 1 | grep ^Benchmark >>../../$t.txt); done; done
//	benchstat kept.txt lib.txt
//
// (the same for ./pkg/routes with -test.bench Filter5000Nodes).
package extenderjson
