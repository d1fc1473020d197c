package policy

import "github.com/gpushare/gpushare/pkg/gpushare"

// FirstFit places req on node the way kube-scheduler's DRA allocator picks devices: it tries
// a ResourceSlice's devices in the order they are listed (gpushare's DRA back end lists
// them by NVML index) and takes the first ones with room, so each container gets the
// fitting cards of lowest index. Scoring DRA nodes scores this placement, the one that will
// happen, rather than the policy's own card choice. Errors: a *FitError, as Place.
func FirstFit(node Node, req gpushare.PodRequest) (Placement, error) {
	return place(node, req, chooseFirstFit)
}

// chooseFirstFit takes the k fitting cards of lowest NVML index.
func chooseFirstFit(node Node, _ []int64, cand []int, _ int64, k int, _ *scratch) []int {
	return selectFirst(cand, k, func(a, b int) bool {
		return node.Cards[a].Index < node.Cards[b].Index
	})
}
