package replay

import (
	"errors"
	"fmt"
	"math/rand"
	"sort"
)

// maxTuneSteps stops a tuning loop that could not end (it cannot with valid input: every
// clone adds GPU request or, when removing, the list shrinks).
const maxTuneSteps = 10_000_000

// workloadStats describes what buildWorkload did.
type workloadStats struct {
	Original      int   // pods in the trace
	Removed       int   // pods dropped by tuning down
	Clones        int   // clones appended by tuning up
	CapacityMilli int64 // cluster GPU capacity, GPU-milli
	RequestMilli  int64 // total GPU request of the returned workload, GPU-milli
}

// buildWorkload orders and tunes the trace pods exactly as the FGD simulator
// (hkust-adsl/kubernetes-scheduler-simulator, pkg/simulator/core.go Simulate and
// simulator.go SortClusterPods / TunePodsByNodeTotalResource) does with
// --shuffle-pod=true, -tuneseed seed and -tune tune:
//
//  1. math/rand is seeded with seed and one Int() is drawn (the simulator logs it).
//  2. The pods are sorted by name and shuffled with rand.Shuffle.
//  3. If the total GPU request is below tune × capacityMilli, clones of pods drawn with
//     rand.Intn from the name-sorted trace are appended, named "<name>-tuned-<i>", until
//     the next clone's per-card gpu_milli (not its num_gpu × gpu_milli: the simulator's
//     check) would push the total over the target. If it is above, pods drawn with
//     rand.Intn from the shuffled list are removed until it is not.
//
// tune <= 0 means no tuning. The input slice is not modified. Errors: empty trace, a trace
// without GPU request, non-positive capacity.
func buildWorkload(pods []PodSpec, capacityMilli int64, seed int64, tune float64) ([]PodSpec, workloadStats, error) {
	st := workloadStats{Original: len(pods), CapacityMilli: capacityMilli}
	if len(pods) == 0 {
		return nil, st, errors.New("workload: the trace has no pods")
	}
	if capacityMilli <= 0 {
		return nil, st, fmt.Errorf("workload: cluster GPU capacity %d is not positive", capacityMilli)
	}
	rng := rand.New(rand.NewSource(seed))
	_ = rng.Int() // the simulator's log.Debugf("... Random Int: %d", seed, rand.Int())

	byName := append([]PodSpec(nil), pods...)
	sort.Slice(byName, func(i, j int) bool { return byName[i].Name < byName[j].Name })
	order := append([]PodSpec(nil), byName...)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })

	var total int64
	for _, p := range order {
		total += p.TotalGPUMilli()
	}
	if total <= 0 {
		return nil, st, errors.New("workload: the trace requests no GPU")
	}
	target := tune * float64(capacityMilli)
	switch {
	case tune <= 0 || float64(total) == target:
	case float64(total) > target:
		for steps := 0; float64(total) > target; steps++ {
			if len(order) == 0 || steps > maxTuneSteps {
				return nil, st, fmt.Errorf("workload: cannot tune down to %.0f GPU-milli", target)
			}
			idx := rng.Intn(len(order))
			total -= order[idx].TotalGPUMilli()
			order = append(order[:idx], order[idx+1:]...)
			st.Removed++
		}
	default:
		for i := 0; ; i++ {
			if i > maxTuneSteps {
				return nil, st, fmt.Errorf("workload: cannot tune up to %.0f GPU-milli", target)
			}
			clone := byName[rng.Intn(len(byName))]
			if float64(total+clone.GPUMilli) > target {
				break
			}
			clone.Name = fmt.Sprintf("%s-tuned-%d", clone.Name, i)
			clone.GPUSpec = append([]string(nil), clone.GPUSpec...)
			total += clone.TotalGPUMilli()
			order = append(order, clone)
			st.Clones++
		}
	}
	st.RequestMilli = total
	return order, st, nil
}

// cutAtArrived returns the prefix of pods up to and including the one whose arrival brings
// the submitted GPU request (GPU-milli, num_gpu × gpu_milli) to pct percent of
// capacityMilli; all pods when the request never gets there.
func cutAtArrived(pods []PodSpec, capacityMilli int64, pct float64) []PodSpec {
	limit := pct / 100 * float64(capacityMilli)
	var arrived int64
	for i, p := range pods {
		arrived += p.TotalGPUMilli()
		if float64(arrived) >= limit {
			return pods[:i+1]
		}
	}
	return pods
}
