package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"testing"
)

// goldenDigest is the SHA-256 of writeOutcomes over corpus(goldenSeed, 200, 10), recorded
// with the map-based Place/Rate/Score that prioritize used before the Scorer existed, and
// re-recorded once for fgd's host cap (every other policy's outcome unchanged). The
// trace-replay results depend on every card choice and every rate bit for bit: a change
// here is a change of behaviour, never a refactoring.
const (
	goldenSeed   = 7
	goldenDigest = "274891f2ceae709a5e7ef08258b5f0608765812a0e6d3257d0bf780bbc0e20b5"
)

func TestPlacementGoldenDigest(t *testing.T) {
	h := sha256.New()
	writeOutcomes(h, corpus(goldenSeed, 200, 10))
	if got := hex.EncodeToString(h.Sum(nil)); got != goldenDigest {
		t.Errorf("digest of placements, rates and scores = %s, want %s", got, goldenDigest)
	}
}

// writeOutcomes writes, through the public API only, every policy's answer for every node
// of every group: Fit's and Place's error or allocation and usage, Rate's exact bits and
// Score; then Scores over each group's fitting nodes.
func writeOutcomes(w io.Writer, groups []group) {
	for gi, g := range groups {
		names, pols := policiesFor(g)
		for pi, pol := range pols {
			var fitNodes []Node
			var fitPlacements []Placement
			for ni, node := range g.nodes {
				fmt.Fprintf(w, "%s g%d n%d fit %v: ", names[pi], gi, ni, Fit(node, g.req))
				p, err := pol.Place(node, g.req)
				if err != nil {
					fmt.Fprintf(w, "err %v\n", err)
					continue
				}
				p.Host = g.host
				fmt.Fprintf(w, "alloc %v usage %v score %d", p.Allocation, p.Usage, pol.Score(node, p))
				if r, ok := pol.(Rater); ok {
					fmt.Fprintf(w, " rate %016x", math.Float64bits(r.Rate(node, p)))
				}
				fmt.Fprintln(w)
				fitNodes, fitPlacements = append(fitNodes, node), append(fitPlacements, p)
			}
			fmt.Fprintf(w, "%s g%d scores %v\n", names[pi], gi, Scores(pol, fitNodes, fitPlacements))
		}
	}
}
