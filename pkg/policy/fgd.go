package policy

import (
	"math"
	"math/bits"
	"slices"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// fgd is a fragmentation-aware policy after "Beware of Fragmentation" (Weng et al., USENIX
// ATC'23). The fragmentation of a node for a workload is the expected number of free units
// that a typical pod cannot use:
//
//	F(node) = sum over gpu shapes s of weight(s) * unusable(node, s)
//	unusable(node, s) = all free units, if the node lacks s's CPU or memory, or fewer than
//	                    s.Cards cards have s.PerCard free;
//	                    else the free units of the cards with less than s.PerCard free,
//	                    plus hostCapWeight × what the host cannot feed (below).
//
// The host cap is ours, not the paper's: the paper only asks whether one more pod of shape s
// fits the node's free CPU and memory. A node whose CPU is running out strands its free cards
// too, only later, so the units s could use beyond what the free CPU and memory feed also
// count as unusable, at half weight (hostCapWeight). What they feed depends on how scarce
// CPU and memory are cluster-wide (demand.pressure against the Capacity the policy was
// given): where they are plentiful, at the workload's average CPU and memory per card unit
// (the cards a high-CPU pod cannot feed, other pods will); where they run out with the cards,
// n × s.Cards × s.PerCard, n being how many pods of s the free CPU and memory still hold
// (ownShare blends the two). A shape whose own pods the host feeds on every card they could
// use is never capped. Neither rule alone serves every workload: the average judges a node
// by what the typical pod needs, which is right while CPU is plentiful, but where the pods
// ask for most of the cluster's CPU by the time the cards fill it lets high-CPU pods spend
// a node's CPU under cards that then stay empty; each shape's own requests guard against
// that but cap nodes that other pods would still fill. Blending by pressure takes the
// average where CPU is plentiful and the own requests where it runs out (the replay figures
// are in docs/design/benchmarks-replay.md).
//
// Node constraints, as in the FGD simulator: a shape carries its pod's node constraint
// (Shape.Constraint; the simulator keys typical pods by their GPU model list), and a node
// that fails it (Node.Unmet) offers the shape none of its free units, so placing a pod there
// lowers that shape's part of F by what the pod takes: pods that may run anywhere are drawn
// to the nodes that constrained pods cannot use. How strongly is the caller's part
// (Workload.ByScarcity): a constrained shape's weight is scaled by the cluster's free units
// over those on the nodes meeting its constraint, so the free cards of a scarce GPU model
// weigh as much as the constrained demand for them. Without the scaling, pod counts alone
// draw unconstrained pods onto the models few shapes name, however scarce, and the pods
// pinned to those models then find no card (docs/design/benchmarks-replay.md).
//
// A placement is scored by how little it raises F (ΔF = F(after) - F(before), lower is
// better); cards inside a node are chosen greedily the same way. The host part matters as
// much as the cards: a pod that takes a node's last CPU strands its free cards, so pods
// without gpu-mem are scored too (when the scheduler sends them, see docs/design/benchmarks.md).
// Ties, common while the workload is unknown, go to binpack's order for gpu pods and, for
// pods without gpu-mem, to the node with the least free card capacity (where CPU is worth
// least to gpu pods). The workload is learned from the pods seen so far (ShapeCounter);
// without one fgd behaves as binpack. Node.Host nil: cards alone.
type fgd struct {
	w Workload
	// groups are the distinct (Cards, PerCard) of w and groupOf[i] the group of w[i]: many
	// shapes differ only in CPU or memory (151 shapes, 25 groups on the default trace), and
	// the card side of frag depends on the group alone, so frag counts cards once per group.
	groups  []cardShape
	groupOf []int
	info    []shapeInfo // info[i]: what caps reads of w[i], precomputed
	// own is how much each shape's own requests count in its host cap against the
	// workload's average, perCPU and perMem (ownShare; 1: only its own).
	own            float64
	perCPU, perMem float64
}

// shapeInfo is one shape as caps and feeds read it, in one small record.
type shapeInfo struct {
	cards  int
	group  int
	req    Host // the shape's CPU and memory request
	invCPU float64
	invMem float64 // 1/req's quantities (0 where not requested)
	// fastPerPod is Cards × PerCard where feeds may compute the cap with floorDiv (that
	// product below 1<<23, so hostFeeds' own n × it cannot overflow, and the requests below
	// 2^52); 0: feeds leaves it to hostFeeds.
	fastPerPod int64
}

type cardShape struct {
	cards   int
	perCard int64
	// perPod is what one pod takes of the cards, cards × perCard (0 where that overflows),
	// and invPerPod its inverse: podsFor's.
	perPod    int64
	invPerPod float64
}

// newFGD indexes w's card shapes and weighs its host cap for capacity c (zero: not known).
func newFGD(w Workload, c Capacity) fgd {
	f := fgd{w: w, groupOf: make([]int, len(w)), info: make([]shapeInfo, len(w))}
	d := w.demand()
	f.own = ownShare(d.pressure(c))
	f.perCPU, f.perMem = d.perUnit()
	for i, s := range w {
		g := slices.IndexFunc(f.groups, func(c cardShape) bool { return c.cards == s.Cards && c.perCard == s.PerCard })
		if g < 0 {
			g = len(f.groups)
			k := cardShape{cards: s.Cards, perCard: s.PerCard}
			if hi, lo := bits.Mul64(uint64(s.Cards), uint64(s.PerCard)); s.Cards > 0 && s.PerCard > 0 && hi == 0 && lo < 1<<62 {
				k.perPod, k.invPerPod = int64(lo), 1/float64(lo)
			}
			f.groups = append(f.groups, k)
		}
		f.groupOf[i] = g
		si := shapeInfo{cards: s.Cards, group: g, req: s.Host}
		if s.Host.CPUMilli > 0 {
			si.invCPU = 1 / float64(s.Host.CPUMilli)
		}
		if s.Host.MemoryMiB > 0 {
			si.invMem = 1 / float64(s.Host.MemoryMiB)
		}
		if per := f.groups[g].perPod; per > 0 && per < 1<<23 && s.Host.CPUMilli < 1<<52 && s.Host.MemoryMiB < 1<<52 {
			si.fastPerPod = per
		}
		f.info[i] = si
	}
	return f
}

var (
	_ usageScorer   = fgd{}
	_ WorkloadAware = fgd{}
)

// WorkloadAware policies take the current workload before each decision: WithWorkload
// returns the policy scoring against w (nil: not known yet) on nodes offering c in all (the
// zero Capacity: not known).
type WorkloadAware interface {
	WithWorkload(w Workload, c Capacity) Policy
}

func (fgd) Name() string { return "fgd" }

func (f fgd) WithWorkload(w Workload, c Capacity) Policy { return newFGD(w, c) }

// tieWeight scales a tie-breaker in 0..1 below any ΔF worth distinguishing.
const tieWeight = 1e-3

func (f fgd) Place(node Node, req gpushare.PodRequest) (Placement, error) {
	return place(node, req, f.chooser())
}

// chooser is best fit while the workload is unknown, else fgd's own choice.
func (f fgd) chooser() chooser {
	if len(f.w) == 0 {
		return chooseBestFit
	}
	return f.choose
}

// choose picks k cards one at a time, each the candidate whose use leaves the least
// fragmentation, best fit on ties. Host resources are the same whichever card is taken.
// Candidates are tried in cand's order every round: with the tolerance below the
// comparison is not transitive, so that order is part of the result. Two candidates with
// the same free units leave the same multiset of free units, so F is computed once per
// distinct value in a round (frag reads the multiset, never the card positions).
func (f fgd) choose(node Node, free []int64, cand []int, need int64, k int, s *scratch) []int {
	s.work = resize(s.work, len(free))
	work := s.work
	copy(work, free)
	caps := f.caps(node.Host, free, s)
	s.picked = s.picked[:0]
	for len(s.picked) < k {
		s.tried = s.tried[:0]
		best, bestF := -1, 0.0
		for _, i := range cand {
			if slices.Contains(s.picked, i) {
				continue
			}
			fr, seen := 0.0, false
			for _, t := range s.tried {
				if t.free == work[i] {
					fr, seen = t.frag, true
					break
				}
			}
			if !seen {
				v := work[i]
				work[i] -= need
				fr = f.frag(work, node.Host != nil, caps, node.Unmet, s)
				work[i] += need
				s.tried = append(s.tried, triedCard{free: v, frag: fr})
			}
			if best < 0 || fr < bestF-1e-9 ||
				(fr <= bestF+1e-9 && bestFit(node.Cards[i], node.Cards[best], work[i], work[best])) {
				best, bestF = i, fr
			}
		}
		work[best] -= need
		s.picked = append(s.picked, best)
	}
	return s.picked
}

// triedCard is one candidate value of a round of choose: a card's free units and F after
// taking the container's units from it.
type triedCard struct {
	free int64
	frag float64
}

// caps returns, for each shape of w, the cap that a host with `host` free puts on the
// units the shape can use of a node whose cards have at most `bound` free (by position;
// every state frag then scores, a candidate of choose or the node after the placement, is
// below it): -1 where the host lacks the shape's CPU or memory (every free unit stranded),
// else hostFeeds, or noCap where the cap cannot bind: the shape fits too few cards of bound,
// or the host feeds all it could use of them (frag then compares the cap with less, so
// either value gives the same F). Nil when host is nil (cards alone). The vector is kept in
// s for the frag calls of one node (two entries: the host before and after a placement),
// keyed by host, bound and the workload's first shape, so a scratch reused across nodes or
// workloads never reads a stale one.
func (f fgd) caps(host *Host, bound []int64, s *scratch) []int64 {
	if host == nil || len(f.w) == 0 {
		return nil
	}
	for i := range s.caps {
		if c := &s.caps[i]; c.valid && c.host == *host && c.w == &f.w[0] && len(c.caps) == len(f.w) && slices.Equal(c.bound, bound) {
			return c.caps
		}
	}
	need := f.podsToUse(bound, s)
	avg := f.averageFeeds(*host)
	c := &s.caps[s.nextCaps]
	s.nextCaps = (s.nextCaps + 1) % len(s.caps)
	c.valid, c.host, c.w = true, *host, &f.w[0]
	c.bound = append(c.bound[:0], bound...)
	c.caps = resize(c.caps, len(f.w))
	for i := range f.info {
		si := &f.info[i]
		k := need[si.group]
		switch {
		case si.cards == 0:
			c.caps[i] = 0 // unused: frag skips shapes without gpu-mem
		case host.CPUMilli < si.req.CPUMilli || host.MemoryMiB < si.req.MemoryMiB:
			c.caps[i] = -1
		case k < 0 || k > 0 && hostHolds(*host, si.req, k):
			c.caps[i] = noCap
		default:
			c.caps[i] = f.feed(i, *host, avg)
		}
	}
	return c.caps
}

// averageFeeds is how many card units a host with `host` free feeds at the workload's
// average CPU and memory per unit (perCPU, perMem); +Inf where the workload asks for
// neither, or where only each shape's own requests count (own 1).
func (f fgd) averageFeeds(host Host) float64 {
	fe := math.Inf(1)
	if f.own >= 1 {
		return fe
	}
	if f.perCPU > 0 {
		fe = float64(host.CPUMilli) / f.perCPU
	}
	if f.perMem > 0 {
		fe = math.Min(fe, float64(host.MemoryMiB)/f.perMem)
	}
	return fe
}

// feed is the host cap of w[i] on a host with `host` free that holds one of its pods: its
// own feeds where own is 1, else avg (averageFeeds) blended with them by own; noCap where
// that exceeds unlimited.
func (f fgd) feed(i int, host Host, avg float64) int64 {
	if f.own >= 1 {
		return f.feeds(i, host)
	}
	fe := avg
	if fe < float64(unlimited) && f.own > 0 {
		fe = f.own*float64(f.feeds(i, host)) + (1-f.own)*fe
	}
	if fe > float64(unlimited) {
		return noCap
	}
	return int64(fe)
}

// hostCapWeight weighs the units the host cap strands against those the cards strand. Full
// weight steers pods away from nodes whose CPU runs low so hard that the whole-card pods of
// multi-GPU workloads lose the empty nodes they need; none lets CPU run out under free
// cards. Half weight keeps both effects: the cards a spent host strands count, but less
// than cards no pod can use at all (the weights compared are in docs/design/benchmarks-replay.md).
const hostCapWeight = 0.5

// unlimited is what hostFeeds answers for a shape its host does not limit (no CPU or memory
// request): more units than any node has.
const unlimited = int64(1) << 40

// noCap stands for a host cap above every usable amount frag compares it with.
const noCap = int64(math.MaxInt64)

// podsToUse returns, per card shape of w, how many of its pods would use everything its
// fitting cards in bound offer: -1 where that is nothing (too few cards fit, or they have
// nothing free), 0 where podsFor declines. It is kept in s for the bound and workload last
// asked (a node's two cap vectors share one).
func (f fgd) podsToUse(bound []int64, s *scratch) []int64 {
	if s.needW == &f.w[0] && len(s.need) == len(f.groups) && slices.Equal(s.needBound, bound) {
		return s.need
	}
	s.needW = &f.w[0]
	s.needBound = append(s.needBound[:0], bound...)
	s.need = resize(s.need, len(f.groups))
	for gi, g := range f.groups {
		var fits int
		var usable int64
		for _, v := range bound {
			if v >= g.perCard {
				fits++
				usable += v
			}
		}
		if fits < g.cards || usable == 0 {
			s.need[gi] = -1
		} else {
			s.need[gi] = podsFor(usable, g.perPod, g.invPerPod)
		}
	}
	return s.need
}

// podsFor is most/per rounded up, without a division, or 0 outside the bounds where a host
// holding that many pods is known to feed at least most units: most ≤ 1<<40, so hostFeeds'
// own "unlimited" is never the binding value; per in 1..1<<23, so hostFeeds' product n × per
// (n < 1<<40) cannot overflow and noCap stands only where it has a true value. The float
// estimate is off by less than one either way, so it truncates to at most the answer, and
// the loop corrects it from below (k × per < 2^41).
func podsFor(most, per int64, invPer float64) int64 {
	if per <= 0 || per >= 1<<23 || most <= 0 || most > 1<<40 {
		return 0
	}
	k := int64(float64(most) * invPer)
	for k*per < most {
		k++
	}
	return k
}

// feeds is hostFeeds(host, w[i]) with its divisions done by multiplying with the inverse
// of the request (floorDiv) where every quantity is below 2^52 and the shape's pod below 1<<23 units
// (where hostFeeds' product cannot overflow); hostFeeds itself elsewhere. host holds one pod
// of the shape (caps checks that first), so its quantities are not negative where the
// shape asks for them.
func (f fgd) feeds(i int, host Host) int64 {
	si := &f.info[i]
	const big = 1 << 52
	if si.fastPerPod == 0 || (si.req.CPUMilli > 0 && host.CPUMilli >= big) || (si.req.MemoryMiB > 0 && host.MemoryMiB >= big) {
		return hostFeeds(host, f.w[i])
	}
	n := unlimited
	if si.req.CPUMilli > 0 {
		n = floorDiv(host.CPUMilli, si.req.CPUMilli, si.invCPU)
	}
	if si.req.MemoryMiB > 0 {
		n = min(n, floorDiv(host.MemoryMiB, si.req.MemoryMiB, si.invMem))
	}
	if n >= unlimited {
		return unlimited
	}
	return n * si.fastPerPod
}

// floorDiv is a/b for 0 ≤ a < 2^52 and 0 < b < 2^52, given invB = 1/b, with multiplications
// only: the float estimate is off by less than one either way, and the loops correct it
// (q × b stays below 2^53).
func floorDiv(a, b int64, invB float64) int64 {
	q := int64(float64(a) * invB)
	for q > 0 && q*b > a {
		q--
	}
	for (q+1)*b <= a {
		q++
	}
	return q
}

// hostHolds reports, with multiplications only, that a host with `free` holds k ≥ 1 pods
// requesting req, where req asks for CPU or memory (hostFeeds is then k × per or more) and
// free holds one (caps checks that first).
func hostHolds(free, req Host, k int64) bool {
	if req.CPUMilli == 0 && req.MemoryMiB == 0 {
		return false // hostFeeds' "unlimited": left to it
	}
	holds := func(free, req int64) bool {
		if req <= 0 {
			return true
		}
		hi, lo := bits.Mul64(uint64(k), uint64(req))
		return hi == 0 && lo <= uint64(free)
	}
	return holds(free.CPUMilli, req.CPUMilli) && holds(free.MemoryMiB, req.MemoryMiB)
}

// frag is F for a node whose cards have the given free units, whose host, when hasHost,
// grants each shape caps[i] (f.caps; without a host the cards alone count), and which fails
// the constraints in unmet (Node.Unmet). The sum runs over w in order, so the result does
// not depend on the grouping.
func (f fgd) frag(free []int64, hasHost bool, caps []int64, unmet ConstraintSet, s *scratch) float64 {
	var total int64
	for _, v := range free {
		total += v
	}
	// Per card shape: how many cards fit it and the free units of those that do not.
	s.stats = s.stats[:0]
	for _, g := range f.groups {
		var st cardStat
		for _, v := range free {
			if v >= g.perCard {
				st.fits++
			} else {
				st.unusable += v
			}
		}
		s.stats = append(s.stats, st)
	}
	stats := s.stats
	var out float64
	for i, sh := range f.w {
		if sh.Cards == 0 {
			continue // a pod without gpu-mem cannot use free cards in any case
		}
		var unusable int64
		if len(unmet) > 0 && unmet.Has(sh.Constraint) {
			unusable = total // the node fails the shape's constraint: nothing is usable
		} else if hasHost && caps[i] < 0 {
			unusable = total
		} else {
			st := stats[f.groupOf[i]]
			unusable = st.unusable
			if st.fits < sh.Cards {
				unusable = total
			} else if hasHost {
				if feed := caps[i]; total-unusable > feed {
					out += sh.Weight * hostCapWeight * float64(total-unusable-feed)
				}
			}
		}
		out += sh.Weight * float64(unusable)
	}
	return out
}

// cardStat is frag's view of the cards for one card shape: how many cards fit it and the
// free units of those that do not.
type cardStat struct {
	fits     int
	unusable int64
}

// Score is -ΔF plus a tie-breaker scaled below one unit.
func (f fgd) Score(node Node, p Placement) float64 {
	var buf [16]int64
	var s scratch
	return f.scoreUsage(node, usageOf(node, p, buf[:0]), &s)
}

func (f fgd) scoreUsage(node Node, u usage, s *scratch) float64 {
	s.before, s.after = resize(s.before, len(node.Cards)), resize(s.after, len(node.Cards))
	before, after := s.before, s.after
	var freeUnits, totalUnits int64
	for i, c := range node.Cards {
		before[i] = c.Free()
		after[i] = before[i] - u.units[i]
		if after[i] < 0 {
			after[i] = 0
		}
		freeUnits += after[i]
		if c.Healthy {
			totalUnits += c.Total
		}
	}
	var tie float64
	switch {
	case u.holds:
		tie = binpack{}.scoreUsage(node, u, s)
	case totalUnits > 0:
		tie = 1 - float64(freeUnits)/float64(totalUnits)
	default:
		tie = 1 // a node without cards is the best home for a pod without gpu-mem
	}
	if len(f.w) == 0 {
		return tieWeight * tie
	}
	var hostAfter *Host
	if node.Host != nil {
		hostAfter = &Host{CPUMilli: node.Host.CPUMilli - u.host.CPUMilli, MemoryMiB: node.Host.MemoryMiB - u.host.MemoryMiB}
	}
	// The free units before bound the cards after (and choose's candidates), so both cap
	// vectors are computed for that bound.
	fa := f.frag(after, hostAfter != nil, f.caps(hostAfter, before, s), node.Unmet, s)
	return -(fa - f.frag(before, node.Host != nil, f.caps(node.Host, before, s), node.Unmet, s)) + tieWeight*tie
}

// hostFeeds is how many units of cards pods of shape s can use on a host with `host` free:
// the number of such pods its CPU and memory still hold, times s.Cards × s.PerCard. A shape
// without a CPU or memory request is not limited by it.
func hostFeeds(host Host, s Shape) int64 {
	n := unlimited
	if s.Host.CPUMilli > 0 {
		n = host.CPUMilli / s.Host.CPUMilli
	}
	if s.Host.MemoryMiB > 0 {
		n = min(n, host.MemoryMiB/s.Host.MemoryMiB)
	}
	if n >= unlimited {
		return unlimited
	}
	return n * s.PerCard * int64(s.Cards)
}
