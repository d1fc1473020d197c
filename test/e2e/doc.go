// Package e2e is the end-to-end suite (build tag e2e; `make e2e`). TestMain starts the local
// cluster of hack/cluster-up.sh in its own state dir (_output/e2e): a real control plane, the
// gpushare extender, kwok for GPU-shaped fake nodes and, with root and containerd, one real
// node running share-plugin. suite_test.go lists the cases in order; TestE2E runs each as a
// subtest (TestE2E/<name>) and checks that it leaves the cluster as it found it
// (restore.go). See docs/local-cluster.md.
package e2e
