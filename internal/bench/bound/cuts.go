package bound

import (
	"fmt"
	"slices"
)

// binFamily is a set of identical bins that the pods of some placements go into, as one
// dimension: the cards of a node class (capacity 1000 GPU-milli; a pod puts gpu_milli on
// each of num_gpu cards), or the nodes of a node class seen in one resource (GPU-milli of
// all cards, cpu or memory; a pod is one item). For any integer placement, the items in
// each bin sum to at most its capacity, so Σ mult·u(size)·x ≤ bins for every
// dual-feasible u (dff.go).
type binFamily struct {
	name     string
	capacity int64
	bins     float64
	vars     []int   // the placements that put items into these bins
	sizes    []int64 // per var: item size
	mult     []int64 // per var: items per pod
	funcs    []dff
}

// binFamilies returns, per node class, the families of its cards and of its nodes in
// GPU, cpu and memory, each with the dual-feasible functions to try.
func (p *program) binFamilies(maxK int) []binFamily {
	var out []binFamily
	for j, nc := range p.nodes {
		n := float64(nc.count)
		cards := binFamily{name: fmt.Sprintf("cards[%d]", j), capacity: cardMilli, bins: float64(nc.Cards) * n}
		gpu := binFamily{name: fmt.Sprintf("node-gpu[%d]", j), capacity: int64(nc.Cards) * cardMilli, bins: n}
		cpu := binFamily{name: fmt.Sprintf("node-cpu[%d]", j), capacity: nc.MilliCPU, bins: n}
		mem := binFamily{name: fmt.Sprintf("node-mem[%d]", j), capacity: nc.MemoryMiB, bins: n}
		for v, pl := range p.vars {
			if pl.node != j {
				continue
			}
			pc := p.pods[pl.pod]
			cards.add(v, pc.GPUMilli, int64(pc.NumGPU))
			gpu.add(v, pc.gpuMilli(), 1)
			cpu.add(v, pc.MilliCPU, 1)
			mem.add(v, pc.MemoryMiB, 1)
		}
		for _, f := range []binFamily{cards, gpu, cpu, mem} {
			if len(f.vars) == 0 || f.capacity <= 0 {
				continue
			}
			sizes := slices.Compact(slices.Sorted(slices.Values(f.sizes)))
			f.funcs = dffs(f.capacity, sizes, maxK)
			out = append(out, f)
		}
	}
	return out
}

func (f *binFamily) add(v int, size, mult int64) {
	f.vars, f.sizes, f.mult = append(f.vars, v), append(f.sizes, size), append(f.mult, mult)
}

// cut returns the family's inequality for u.
func (f *binFamily) cut(u dff) row {
	r := row{name: f.name + " " + u.name, rhs: f.bins}
	for i, v := range f.vars {
		if c := float64(f.mult[i]) * u.of(f.sizes[i]); c != 0 {
			r.terms = append(r.terms, term{v, c})
		}
	}
	return r
}

// mostViolated returns the family's cut that x violates most, by more than tol bins, and
// whether there is one. Cuts already added (by name) are skipped.
func (f *binFamily) mostViolated(x []float64, tol float64, added map[string]bool) (row, bool) {
	var best row
	bestViol := tol
	for _, u := range f.funcs {
		r := f.cut(u)
		if added[r.name] {
			continue
		}
		lhs := 0.0
		for _, t := range r.terms {
			lhs += t.coef * x[t.v]
		}
		if viol := lhs - r.rhs; viol > bestViol {
			best, bestViol = r, viol
		}
	}
	return best, bestViol > tol && best.name != ""
}
