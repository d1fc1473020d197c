// Package routes serves the scheduler-extender HTTP API under /gpushare-scheduler (filter,
// prioritize, bind, inspect) plus /healthz, /readyz, /version and /metrics. One file per
// verb; each registers its own routes. Handlers decode k8s.io/kube-scheduler/extender/v1
// types, ask the cache and the placement policy, and encode the answer; the arithmetic
// lives in pkg/policy and pkg/cache.
package routes
