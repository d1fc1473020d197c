package replay

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
)

// Step is the cluster state right after one pod of the workload was placed or failed.
type Step struct {
	Index          int    // 1-based position in the workload
	Pod            string // pod name
	NumGPU         int
	GPUMilli       int64  // per card
	Node           string // where it went; empty when it failed
	ArrivedMilli   int64  // GPU request of all pods submitted so far, GPU-milli
	AllocatedMilli int64  // GPU request of all pods bound so far, GPU-milli
	Failed         int    // pods failed so far
	// Reason is why the pod failed (the scheduler's PodScheduled message in a cluster run).
	Reason string
}

// recorder accumulates the replay's steps. Percentages are of the cluster's GPU capacity,
// as in the FGD paper's "arrived workload" and "allocation ratio".
type recorder struct {
	capacity  int64
	arrived   int64
	allocated int64
	failed    int
	bound     int
	evictions int // pods an offline defragmenter moved (defragmenter)
	steps     []Step
	// at100 is the first step whose arrived GPU request reached capacity (0: not yet).
	at100 int
}

// newRecorder starts an empty record for a cluster of capacityMilli GPU-milli (> 0).
func newRecorder(capacityMilli int64) *recorder {
	return &recorder{capacity: capacityMilli}
}

// Record adds one pod's outcome: node is where it was bound, "" when it failed.
func (r *recorder) Record(p PodSpec, node string) Step {
	return r.RecordReason(p, node, "")
}

// RecordReason is Record with the reason of a failure.
func (r *recorder) RecordReason(p PodSpec, node, reason string) Step {
	return r.RecordAllocated(p, node, reason, p.TotalGPUMilli())
}

// RecordAllocated is RecordReason with the GPU-milli the pod was given when bound, as read
// from what the cluster allocated rather than from its request.
func (r *recorder) RecordAllocated(p PodSpec, node, reason string, allocatedMilli int64) Step {
	r.arrived += p.TotalGPUMilli()
	if node == "" {
		r.failed++
	} else {
		r.bound++
		r.allocated += allocatedMilli
	}
	s := Step{
		Index: len(r.steps) + 1, Pod: p.Name, NumGPU: p.NumGPU, GPUMilli: p.GPUMilli, Node: node,
		ArrivedMilli: r.arrived, AllocatedMilli: r.allocated, Failed: r.failed, Reason: reason,
	}
	r.steps = append(r.steps, s)
	if r.at100 == 0 && r.arrived >= r.capacity {
		r.at100 = s.Index
	}
	return s
}

// Steps returns the recorded steps (shared; do not modify).
func (r *recorder) Steps() []Step { return r.steps }

// Bound and Failed count the pods so far.
func (r *recorder) Bound() int  { return r.bound }
func (r *recorder) Failed() int { return r.failed }

// Pct converts GPU-milli to percent of cluster capacity.
func (r *recorder) Pct(milli int64) float64 {
	return 100 * float64(milli) / float64(r.capacity)
}

// UnallocatedAt100 is 100 − allocated % at the first step where the arrived GPU request
// reached 100 % of capacity; ok is false when it never did.
func (r *recorder) UnallocatedAt100() (pct float64, ok bool) {
	if r.at100 == 0 {
		return 0, false
	}
	return 100 - r.Pct(r.steps[r.at100-1].AllocatedMilli), true
}

// WriteSteps writes steps.csv: every `every`-th step (1 = all), the step where arrival
// crossed 100 % and the last step. Columns: step, pod, num_gpu, gpu_milli, node,
// arrived_pct, allocated_pct, failed_pods, reason.
func (r *recorder) WriteSteps(w io.Writer, every int) error {
	if every < 1 {
		every = 1
	}
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"step", "pod", "num_gpu", "gpu_milli", "node", "arrived_pct", "allocated_pct", "failed_pods", "reason"}); err != nil {
		return fmt.Errorf("writing steps: %w", err)
	}
	for i, s := range r.steps {
		if s.Index%every != 0 && i != len(r.steps)-1 && s.Index != r.at100 {
			continue
		}
		rec := []string{
			strconv.Itoa(s.Index), s.Pod, strconv.Itoa(s.NumGPU), strconv.FormatInt(s.GPUMilli, 10), s.Node,
			strconv.FormatFloat(r.Pct(s.ArrivedMilli), 'f', 4, 64),
			strconv.FormatFloat(r.Pct(s.AllocatedMilli), 'f', 4, 64),
			strconv.Itoa(s.Failed),
			s.Reason,
		}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("writing steps: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("writing steps: %w", err)
	}
	return nil
}
