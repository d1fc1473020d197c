// Package replay replays Alibaba's GPU-sharing trace (cluster-trace-gpu-v2023, "openb") the
// way the FGD simulator (hkust-adsl/kubernetes-scheduler-simulator) does: parse the node and
// pod CSVs, shuffle the pods with a seed and append clones until the GPU request reaches a
// multiple of cluster capacity (buildWorkload), then submit them one at a time — against a real
// cluster of kwok nodes (driver) or to pkg/policy directly (replayOffline) — and record the
// allocated GPU share against the arrived GPU request (recorder, steps.csv, summary.json).
//
// GPU quantities in the trace are GPU-milli: 1000 is one whole card. A pod asks for
// num_gpu cards with gpu_milli on each; its GPU request is num_gpu × gpu_milli.
package replay
