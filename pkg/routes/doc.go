// Package routes serves the scheduler-extender HTTP API as two handler sets for two
// listeners: the scheduler verbs under /gpushare-scheduler (filter, prioritize, bind), and
// the diagnostics (/gpushare-scheduler/inspect, /healthz, /readyz, /version, /metrics). One
// file per verb; each registers its own routes. Handlers decode
// k8s.io/kube-scheduler/extender/v1 types, ask the cache and the placement policy, and
// encode the answer; the arithmetic lives in pkg/policy and pkg/cache.
package routes
