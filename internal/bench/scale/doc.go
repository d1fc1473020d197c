// Package scale drives the 5000-node scale benchmark against a real API
// server and kube-scheduler (hack/bench/scale.sh starts those): it creates the nodes, runs
// one pod set through the scheduler alone and through the scheduler with the gpushare
// extender, checks burst safety on one node, loads tens of thousands of placed pods for the
// extender's memory figure, and writes every result as JSON for the final report.
//
// Nodes are plain Node objects with a Ready condition and no heartbeat: no kwok and no
// kube-controller-manager (whose node lifecycle controller would taint heartbeat-less nodes
// unreachable). kube-scheduler only looks at allocatable, labels and taints, so this places
// pods exactly as on kubelet nodes while leaving the two shared cores to the scheduler, the
// extender and the API server.
package scale
