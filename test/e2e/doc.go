// Package e2e is the end-to-end suite (build tag e2e; `make e2e`). TestMain starts the local
// cluster of hack/cluster-up.sh in its own state dir (_output/e2e): a real control plane, the
// gpushare extender, kwok for GPU-shaped fake nodes and, with root and containerd, one real
// node running share-plugin. Cases live in cases.go; each TestX runs one. See
// docs/local-cluster.md.
package e2e
