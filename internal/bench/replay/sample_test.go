package replay

import "testing"

// sampleDir is the openb sample the trace tests read (testdata/openb-sample/README.md says
// how it was cut): 61 GPU nodes and 300 pods of two trace families.
const sampleDir = "testdata/openb-sample/"

// sampleNodes returns the sample's GPU nodes.
func sampleNodes(t *testing.T) []NodeSpec {
	t.Helper()
	nodes, err := readNodesFile(sampleDir + "openb_node_list_gpu_node.csv")
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

// samplePods returns the sample's pods of a trace family ("gpuspec25", "multigpu20").
func samplePods(t *testing.T, family string) []PodSpec {
	t.Helper()
	pods, err := readPodsFile(sampleDir + "openb_pod_list_" + family + ".csv")
	if err != nil {
		t.Fatal(err)
	}
	return pods
}
