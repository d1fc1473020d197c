package replay

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"slices"
	"strings"
	"time"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// offlineNode is one node's free resources during an offline replay: cards and free
// cpu and memory (policy.Host) as policies see them, and the pods placed.
type offlineNode struct {
	spec   NodeSpec
	pods   int
	policy policy.Node
	// load is what kube-scheduler's resource scorers see (DRAAlone).
	load hostLoad
}

// Tie-breaking of replayOffline.
const (
	// TiesFirst: the best-scored node (Policy.Score), lowest node index on ties.
	// Deterministic; the policy's own order at full resolution.
	TiesFirst = "first"
	// TiesRandom emulates the cluster path: nodes get the extender's integer priorities
	// (policy.NormalizeScores over the candidates) and a seeded random pick among the top
	// ones, as kube-scheduler does; CPU-only pods as offlineConfig.CPUPods says.
	TiesRandom = "random"
	// TiesRandomScore is TiesRandom with each node's standalone integer (standaloneScorer)
	// instead of policy.NormalizeScores: each node judged alone, without the others, so
	// coarser, with many more ties.
	TiesRandomScore = "random-score"
)

// offlineConfig configures replayOffline.
type offlineConfig struct {
	Policy policy.Policy
	Units  Units
	Ties   string // TiesFirst (default) or TiesRandom
	Seed   int64  // for TiesRandom
	// CPUPods: where CPU-only pods go with TiesRandom*: CPUFirstFit (default), CPURandom or
	// CPURanked.
	CPUPods string
	// DRA: "" places pods as the device-plugin path does (the policy's card choice);
	// DRAAlone or DRAGPUShare as kube-scheduler's DRA path does (see there).
	DRA string
	// Defrag: when a GPU pod fits nowhere, move at most this many pods of one node to make
	// room for it (defragmenter; device-plugin path only); 0: none.
	Defrag int
	// Reserve: hold whole cards back for whole-card pods (device-plugin path only; the zero
	// value: none). See Reservation.
	Reserve Reservation
}

// Placement of CPU-only pods on the emulated cluster path.
const (
	// CPUFirstFit: the extender does not see them (managedResources), and kube-scheduler
	// without score plugins stops filtering at the first feasible node
	// (findNodesThatPassFilters, numNodesToFind = 1) from a start index that GPU pods,
	// which visit every node, leave in place: in effect first fit in node order.
	CPUFirstFit = "first-fit"
	// CPURandom: the extender sees them (REPLAY_ALL_PODS=yes) but scores every node alike:
	// a random feasible node.
	CPURandom = "random"
	// CPURanked: the extender ranks them like GPU pods (policy.NormalizeScores).
	CPURanked = "ranked"
	// CPUExtender: what the extender's prioritize does with them (REPLAY_ALL_PODS=yes):
	// CPURanked for a policy.WorkloadAware policy, CPURandom for the others, which score
	// pods without gpu-mem 0 everywhere.
	CPUExtender = "extender"
)

// replayOffline replays pods with a policy directly, without a cluster: for each pod in order,
// the candidate nodes are those whose model the pod allows, with enough free cpu, memory
// and pod slots, where Place succeeds; the pod goes to the best candidate (see TiesFirst,
// TiesRandom) and fails when there is none. Nodes carry their free cpu and memory
// (policy.Node.Host) and placements the pod's request. A policy.WorkloadAware policy gets,
// before each pod, the typical shapes of the pods seen so far, this one included, and the
// nodes' capacity in all.
// progress (may be nil) gets a bar. Errors: an unknown tie mode, ctx cancelled.
func replayOffline(ctx context.Context, cfg offlineConfig, nodes []NodeSpec, pods []PodSpec, rec *recorder, progress io.Writer) (time.Duration, error) {
	o, capacity, err := newOffline(cfg, nodes)
	if err != nil {
		return 0, err
	}
	bar := newProgress(progress, len(pods))
	defer bar.Done()
	learn := newLearner(cfg.Policy, capacity)
	var defrag *defragmenter
	if cfg.Defrag > 0 {
		defrag = newDefragmenter(o, cfg.Defrag)
		defer func() { rec.evictions = defrag.evictions }()
	}
	start := time.Now()
	for i, pod := range pods {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return time.Since(start), err
			}
		}
		p := learn.next(o, pod)
		node := o.place(p, pod)
		if defrag != nil {
			if node != "" {
				defrag.record(pod, node, o.lastUsage)
			} else {
				node = defrag.rescue(o, p, pod)
			}
		}
		bar.Update(rec.Record(pod, node), rec)
	}
	return time.Since(start), nil
}

// learner gives a policy.WorkloadAware policy the workload seen so far.
type learner struct {
	base     policy.Policy
	wa       policy.WorkloadAware // nil: the policy does not learn
	shapes   policy.ShapeCounter
	cons     *modelConstraints
	capacity policy.Capacity
}

func newLearner(p policy.Policy, capacity policy.Capacity) *learner {
	wa, _ := p.(policy.WorkloadAware)
	return &learner{base: p, wa: wa, cons: &modelConstraints{ids: map[string]policy.Constraint{}}, capacity: capacity}
}

// next counts pod's shape and returns the policy to place it with: the base policy, or a
// policy.WorkloadAware one given the typical shapes of the pods seen so far, this one
// included, and the nodes' capacity in all.
func (l *learner) next(o *offline, pod PodSpec) policy.Policy {
	if l.wa == nil {
		return l.base
	}
	l.shapes.Add(podRequest(o.cfg.Units, pod), policy.Host{CPUMilli: pod.MilliCPU, MemoryMiB: pod.MemoryMiB}, l.cons.of(pod, o.state))
	w := l.shapes.Workload(policy.WorkloadCoverage, policy.WorkloadMaxShapes)
	if len(l.cons.specs) > 0 {
		w = w.ByScarcity(policy.ReachOf(o.nodes(), len(l.cons.specs)+1))
	}
	return l.wa.WithWorkload(w, l.capacity)
}

// newOffline validates cfg (defaults filled in) and returns the replay's state over nodes,
// empty, and their capacity in all. Errors: an unknown tie, CPU-only pod or DRA mode.
func newOffline(cfg offlineConfig, nodes []NodeSpec) (*offline, policy.Capacity, error) {
	switch cfg.CPUPods {
	case "":
		cfg.CPUPods = CPUFirstFit
	case CPUFirstFit, CPURandom, CPURanked:
	case CPUExtender:
		cfg.CPUPods = CPURandom
		if _, ok := cfg.Policy.(policy.WorkloadAware); ok {
			cfg.CPUPods = CPURanked
		}
	default:
		return nil, policy.Capacity{}, fmt.Errorf("offline CPU-only pods %q: want %q, %q, %q or %q", cfg.CPUPods, CPUFirstFit, CPURandom, CPURanked, CPUExtender)
	}
	if err := cfg.checkDRA(); err != nil {
		return nil, policy.Capacity{}, err
	}
	if cfg.Defrag < 0 || (cfg.Defrag > 0 && cfg.DRA != "") {
		return nil, policy.Capacity{}, fmt.Errorf("offline defragmenter budget %d: want 0 or more, and 0 with the DRA path", cfg.Defrag)
	}
	if err := cfg.Reserve.check(cfg.DRA, cfg.Defrag); err != nil {
		return nil, policy.Capacity{}, err
	}
	switch cfg.Ties {
	case "":
		cfg.Ties = TiesFirst
	case TiesFirst, TiesRandom, TiesRandomScore:
	default:
		return nil, policy.Capacity{}, fmt.Errorf("offline ties %q: want %q, %q or %q", cfg.Ties, TiesFirst, TiesRandom, TiesRandomScore)
	}
	state, capacity := newOfflineNodes(cfg.Units, nodes)
	o := &offline{cfg: cfg, state: state, rng: rand.New(rand.NewSource(cfg.Seed)), view: make([]policy.Node, len(state))}
	if cfg.Ties == TiesRandomScore {
		var err error
		if o.standalone, err = newStandaloneScorer(); err != nil {
			return nil, policy.Capacity{}, err
		}
	}
	return o, capacity, nil
}

// newOfflineNodes returns nodes empty, each card of units' size for its model, and their
// capacity in all.
func newOfflineNodes(units Units, nodes []NodeSpec) ([]*offlineNode, policy.Capacity) {
	state := make([]*offlineNode, 0, len(nodes))
	var capacity policy.Capacity
	for _, n := range nodes {
		on := &offlineNode{spec: n, policy: policy.Node{Name: n.Name, Host: &policy.Host{CPUMilli: n.MilliCPU, MemoryMiB: n.MemoryMiB}},
			load: hostLoad{allocCPU: n.MilliCPU, allocMem: n.MemoryMiB}}
		per := units.CardUnits(n.Model)
		for i := 0; i < n.GPUs; i++ {
			on.policy.Cards = append(on.policy.Cards, policy.Card{Index: i, Total: per, Healthy: true})
		}
		capacity.Units += int64(n.GPUs) * per
		capacity.Host.CPUMilli += n.MilliCPU
		capacity.Host.MemoryMiB += n.MemoryMiB
		state = append(state, on)
	}
	return state, capacity
}

func podRequest(units Units, pod PodSpec) gpushare.PodRequest {
	if pod.NumGPU == 0 {
		return gpushare.PodRequest{}
	}
	return gpushare.PodRequest{Containers: []gpushare.ContainerRequest{{
		Ref: gpushare.ContainerRef{Index: 0}, Name: "main", Kind: gpushare.App,
		Units: units.PodUnitsPerCard(pod) * int64(pod.NumGPU), Cards: pod.NumGPU,
	}}}
}

type offline struct {
	cfg   offlineConfig
	state []*offlineNode
	rng   *rand.Rand
	view  []policy.Node // nodes' buffer
	// standalone gives TiesRandomScore its per-node integers.
	standalone standaloneScorer
	// placeDRA's buffers: candidates' positions in state, their scores or priorities.
	idx        []int
	scores     []float64
	priorities []int64
	// lastUsage is the card usage of the last placement applied (replayChurn releases it
	// when the pod leaves).
	lastUsage gpushare.CardUnits
}

// nodes returns every node as the policy sees it (a buffer reused from call to call).
func (o *offline) nodes() []policy.Node {
	for i, n := range o.state {
		o.view[i] = n.policy
	}
	return o.view
}

// place chooses a node for pod, applies the placement and returns the node name ("" when
// nothing fits). Candidates are scored with one policy.Scorer, as one prioritize call does
// (the same fit and, bit for bit, the same score as Place then Policy.Score, without
// building a Placement per node); only the chosen node's placement is built.
// TiesRandomScore needs each node's Placement for its standalone integer, and builds them
// all.
func (o *offline) place(p policy.Policy, pod PodSpec) string {
	req := podRequest(o.cfg.Units, pod)
	if o.cfg.DRA != "" {
		return o.placeDRA(p, pod, req)
	}
	host := policy.Host{CPUMilli: pod.MilliCPU, MemoryMiB: pod.MemoryMiB}
	perCard := o.cfg.Units.PodUnitsPerCard(pod)
	restricted := o.cfg.Reserve.restricts(o, pod)
	byScore := o.cfg.Ties == TiesRandomScore
	var sc *policy.Scorer
	if !byScore {
		sc = policy.NewScorer(p, req, host)
	}
	var (
		idx        []int
		scores     []float64
		nodes      []policy.Node
		placements []policy.Placement
	)
	for i, n := range o.state {
		if !n.admits(pod, perCard) {
			continue
		}
		view := n.policy
		if restricted {
			view = usedCards(view)
		}
		if !byScore {
			score, ok := sc.Score(view)
			if !ok {
				continue // does not fit here
			}
			idx, scores = append(idx, i), append(scores, score)
			continue
		}
		pl, err := p.Place(view, req)
		if err != nil {
			continue // a *FitError: does not fit here
		}
		pl.Host = host
		idx = append(idx, i)
		nodes = append(nodes, view)
		placements = append(placements, pl)
	}
	if len(idx) == 0 {
		return ""
	}
	var best int
	var pl policy.Placement
	if byScore {
		standalone := make([]int64, len(nodes))
		for i := range nodes {
			standalone[i] = o.standalone.score(p, nodes[i], placements[i])
		}
		best = o.choose(pod, nil, standalone)
		pl = placements[best]
	} else {
		best = o.choose(pod, scores, nil)
		view := o.state[idx[best]].policy
		if restricted {
			view = usedCards(view)
		}
		var err error
		if pl, err = p.Place(view, req); err != nil {
			panic(fmt.Sprintf("offline replay: Place fails where the Scorer fits: %v", err)) // a policy bug
		}
	}
	return o.apply(o.state[idx[best]], pod, pl)
}

// apply places pod on n with placement pl and returns n's name.
func (o *offline) apply(n *offlineNode, pod PodSpec, pl policy.Placement) string {
	n.policy.Host.CPUMilli -= pod.MilliCPU
	n.policy.Host.MemoryMiB -= pod.MemoryMiB
	n.load.add(pod.MilliCPU, pod.MemoryMiB)
	n.pods++
	o.lastUsage = pl.Usage
	for k := range n.policy.Cards {
		n.policy.Cards[k].Used += pl.Usage[n.policy.Cards[k].Index]
	}
	return n.spec.Name
}

// choose returns the position of the chosen candidate, given the candidates' scores
// (TiesFirst, TiesRandom) or, for TiesRandomScore, their standalone integers.
func (o *offline) choose(pod PodSpec, scores []float64, priorities []int64) int {
	if o.cfg.Ties == TiesRandom || o.cfg.Ties == TiesRandomScore {
		if pod.NumGPU == 0 {
			switch o.cfg.CPUPods {
			case CPUFirstFit:
				return 0
			case CPURandom:
				return o.rng.Intn(max(len(scores), len(priorities)))
			}
		}
		if o.cfg.Ties == TiesRandom {
			priorities = policy.NormalizeScores(scores, nil)
		}
		return o.top(priorities)
	}
	best := 0
	for i := range scores {
		if i == 0 || scores[i] > scores[best] {
			best = i
		}
	}
	return best
}

// admits says whether pod passes the filters before the card choice on n: its GPU model,
// free cpu, memory and pod slots, and a cheap pre-check of enough cards with perCard free.
func (n *offlineNode) admits(pod PodSpec, perCard int64) bool {
	free := n.policy.Host
	if !pod.AllowsModel(n.spec.Model) || free.CPUMilli < pod.MilliCPU || free.MemoryMiB < pod.MemoryMiB || n.pods >= NodePodCapacity {
		return false
	}
	return enoughCards(n.policy, perCard, pod.NumGPU)
}

// top returns the position of the highest priority, ties broken at random by reservoir
// sampling, as kube-scheduler's selectHost does.
func (o *offline) top(priorities []int64) int {
	best, ties := 0, 0
	for i, s := range priorities {
		switch {
		case s > priorities[best]:
			best, ties = i, 1
		case s == priorities[best]:
			ties++
			if o.rng.Intn(ties) == 0 {
				best = i
			}
		}
	}
	return best
}

// enoughCards is a cheap pre-check: at least count cards with perCard free.
func enoughCards(n policy.Node, perCard int64, count int) bool {
	if count == 0 {
		return len(n.Cards) > 0
	}
	ok := 0
	for _, c := range n.Cards {
		if c.Free() >= perCard {
			ok++
		}
	}
	return ok >= count
}

// modelConstraints numbers the distinct gpu_spec of the pods seen (as policy.Constraints;
// the cluster path turns a gpu_spec into a required node affinity on the GPU product label,
// and the extender numbers that) and keeps each node's policy.Node.Unmet: the constraints
// its model fails, one set per model.
type modelConstraints struct {
	ids   map[string]policy.Constraint
	specs [][]string // specs[c-1]: the models constraint c allows, sorted
}

// of returns pod's constraint (0: any model), numbering a new gpu_spec and then updating the
// Unmet set of every node in state.
func (m *modelConstraints) of(pod PodSpec, state []*offlineNode) policy.Constraint {
	if len(pod.GPUSpec) == 0 {
		return 0
	}
	spec := slices.Compact(slices.Sorted(slices.Values(pod.GPUSpec)))
	key := strings.Join(spec, "|")
	if c, ok := m.ids[key]; ok {
		return c
	}
	c := policy.Constraint(len(m.specs) + 1)
	m.ids[key] = c
	m.specs = append(m.specs, spec)
	byModel := map[string]policy.ConstraintSet{}
	for _, n := range state {
		set, ok := byModel[n.spec.Model]
		if !ok {
			set = n.policy.Unmet
			if !slices.Contains(spec, n.spec.Model) {
				set = set.With(c)
			}
			byModel[n.spec.Model] = set
		}
		n.policy.Unmet = set
	}
	return c
}
