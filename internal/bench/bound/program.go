package bound

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

// placement is one variable of the program: how many pods of a pod class go to a node
// class (a real number in the relaxation).
type placement struct{ pod, node int }

// term is one coefficient of a row.
type term struct {
	v    int // variable
	coef float64
}

// row is one constraint Σ coef·x ≤ rhs.
type row struct {
	name  string
	terms []term
	rhs   float64
}

// program is the linear program: maximise the allocated GPU, in cards, over the
// placements, subject to rows. Every row holds for every integer placement.
type program struct {
	nodes []nodeClass
	pods  []podClass
	vars  []placement
	obj   []float64 // per variable: GPU cards of one pod (num_gpu × gpu-milli / 1000)
	rows  []row
}

// newProgram builds the relaxation without cuts: a variable per pod class and node class
// where one pod fits an empty node (model allowed by gpu_spec, num_gpu ≤ cards, cpu and
// memory); per pod class, at most its count; per node class, the pods' GPU, cpu and
// memory at most the class's total. Rows are scaled to the class (GPU in cards, cpu and
// memory in nodes) to keep the simplex's numbers of one size.
func newProgram(nodes []nodeClass, pods []podClass) *program {
	p := &program{nodes: nodes, pods: pods}
	byNode := make([][]int, len(nodes))
	for i, pc := range pods {
		r := row{name: fmt.Sprintf("pods[%d]", i), rhs: float64(pc.count)}
		for j, nc := range nodes {
			if !pc.fits(nc) {
				continue
			}
			v := len(p.vars)
			p.vars = append(p.vars, placement{pod: i, node: j})
			p.obj = append(p.obj, float64(pc.gpuMilli())/cardMilli)
			r.terms = append(r.terms, term{v, 1})
			byNode[j] = append(byNode[j], v)
		}
		if len(r.terms) > 0 {
			p.rows = append(p.rows, r)
		}
	}
	for j, nc := range nodes {
		if len(byNode[j]) == 0 {
			continue
		}
		n := float64(nc.count)
		gpu := row{name: fmt.Sprintf("gpu[%d]", j), rhs: float64(nc.Cards) * n}
		cpu := row{name: fmt.Sprintf("cpu[%d]", j), rhs: n}
		mem := row{name: fmt.Sprintf("mem[%d]", j), rhs: n}
		for _, v := range byNode[j] {
			pc := pods[p.vars[v].pod]
			gpu.terms = append(gpu.terms, term{v, float64(pc.gpuMilli()) / cardMilli})
			if pc.MilliCPU > 0 {
				cpu.terms = append(cpu.terms, term{v, float64(pc.MilliCPU) / float64(nc.MilliCPU)})
			}
			if pc.MemoryMiB > 0 {
				mem.terms = append(mem.terms, term{v, float64(pc.MemoryMiB) / float64(nc.MemoryMiB)})
			}
		}
		for _, r := range []row{gpu, cpu, mem} {
			if !p.redundant(r) {
				p.rows = append(p.rows, r)
			}
		}
	}
	return p
}

// key identifies the inequality whatever its scale: the coefficients over the right-hand
// side, to 12 digits.
func (r row) key() string {
	terms := slices.SortedFunc(slices.Values(r.terms), func(a, b term) int { return cmp.Compare(a.v, b.v) })
	var b strings.Builder
	for _, t := range terms {
		fmt.Fprintf(&b, "%d:%.12g ", t.v, t.coef/r.rhs)
	}
	return b.String()
}

// redundant reports whether r holds even with every pod of every class in it placed: then it
// never binds and leaving it out (fewer rows for the simplex) changes no optimum.
func (p *program) redundant(r row) bool {
	lhs := 0.0
	for _, t := range r.terms {
		lhs += t.coef * float64(p.pods[p.vars[t.v].pod].count)
	}
	return lhs <= r.rhs
}

// solve returns the program's optimum (GPU cards allocated) and the placements there.
// The program is in the form max obj·x, rows·x ≤ rhs, x ≥ 0 with rhs ≥ 0, so the slacks
// are a feasible first basis and gonum's simplex needs no phase 1.
//
// gonum's dense simplex has no safeguard against degenerate pivots, and the program is
// highly degenerate (many pods of one size, cuts through the same vertex): a run can end
// on a singular basis. So each right-hand side is raised by a random fraction of
// perturbation (at most 1e-7 of itself), which breaks the ties; raising a right-hand side
// only relaxes the program, so the optimum stays an upper bound of the allocation (by at
// most that fraction more). A singular basis is retried with other draws.
func (p *program) solve() (float64, []float64, error) {
	var err error
	for try := int64(1); try <= 4; try++ {
		var cards float64
		var x []float64
		if cards, x, err = p.solveOnce(rand.New(rand.NewSource(try))); err == nil {
			return cards, x, nil
		}
	}
	return 0, nil, err
}

// perturbation is the largest relative raise of a right-hand side (solve).
const perturbation = 1e-7

func (p *program) solveOnce(rng *rand.Rand) (float64, []float64, error) {
	n, m := len(p.vars), len(p.rows)
	if n == 0 {
		return 0, nil, nil
	}
	a := mat.NewDense(m, n+m, nil)
	b := make([]float64, m)
	for r, rw := range p.rows {
		for _, t := range rw.terms {
			a.Set(r, t.v, a.At(r, t.v)+t.coef)
		}
		a.Set(r, n+r, 1)
		b[r] = rw.rhs * (1 + perturbation*rng.Float64())
	}
	c := make([]float64, n+m)
	for v, o := range p.obj {
		c[v] = -o
	}
	basic := make([]int, m)
	for r := range basic {
		basic[r] = n + r
	}
	opt, x, err := lp.Simplex(c, a, b, 1e-10, basic)
	if err != nil {
		return 0, nil, fmt.Errorf("solving the linear program (%d rows, %d placements): %w", m, n, err)
	}
	if opt > 0 {
		return 0, nil, errors.New("solving the linear program: negative allocation")
	}
	return -opt, x[:n], nil
}
