// Package watchdog is share-plugin's GPU memory usage watchdog: every interval it lists each
// card's processes through NVML, charges each process to its pod's container through
// /proc/<pid>/cgroup, compares what each container uses with what it was granted (from the
// node agent's ledger, behind the Ledger interface), reports containers that stay over
// (GPUMemoryOverGrant events, gpushare_container_over_grant_total) and, if configured,
// annotates or evicts their pods; on a node labelled gpushare.io/isolation=mps it reports the
// processes that bypass the cards' MPS servers (GPUMPSEscape events,
// gpushare_mps_escapes_total) and by default evicts their pods; off MPS nodes it charges each
// process's SM utilisation to its container too; it exports the figures as metrics and
// publishes them on the node (gpushare.AnnotationNodeUsage).
//
// Files in the order of one step: node_isolation.go (is the node an MPS node), sample.go
// (list and attribute), utilization.go (SM utilisation per container), judge.go (episodes, events, actions), mps_escape.go (processes outside
// MPS), actions.go (annotate, evict), watchdog.go (Run, step, publish), metrics.go
// (Collector).
package watchdog
