package main

import (
	"net/http"
	"net/http/pprof"
)

// withProfiling serves Go's runtime profiles (net/http/pprof) under /debug/pprof/ and every
// other path with next. Off by default (--profiling); main mounts it on the diagnostics
// listener, behind the same client-certificate check as /metrics. kube-scheduler's own
// enableProfiling serves the same paths, so one pprof command line profiles both during a
// benchmark.
func withProfiling(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/", next)
	return mux
}
