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
// re-recorded for fgd's host cap and for its half weight (every other policy's outcome
// unchanged). The
// trace-replay results depend on every card choice and every rate bit for bit: a change
// here is a change of behaviour, never a refactoring.
const (
	goldenSeed   = 7
	goldenDigest = "c4363d013291e8c317ce14e55f2b38efc252cf79ea60e5b2945fd06e2f8e2b12"
)

func TestPlacementGoldenDigest(t *testing.T) {
	h := sha256.New()
	writeOutcomes(h, corpus(goldenSeed, 200, 10))
	if got := hex.EncodeToString(h.Sum(nil)); got != goldenDigest {
		t.Errorf("digest of placements, rates and scores = %s, want %s", got, goldenDigest)
	}
}

// writeOutcomes writes every policy's answer for every node of every group: fit's and
// Place's error or allocation and usage, Score and Rate's exact bits; then Rank over each
// group's fitting nodes.
func writeOutcomes(w io.Writer, groups []group) {
	for gi, g := range groups {
		names, pols := policiesFor(g)
		for pi, pol := range pols {
			var fitNodes []Node
			var fitPlacements []Placement
			for ni, node := range g.nodes {
				fmt.Fprintf(w, "%s g%d n%d fit %v: ", names[pi], gi, ni, fit(node, g.req))
				p, err := pol.Place(node, g.req)
				if err != nil {
					fmt.Fprintf(w, "err %v\n", err)
					continue
				}
				p.Host = g.host
				fmt.Fprintf(w, "alloc %v usage %v score %d", p.Allocation, p.Usage, Score(pol, node, p))
				fmt.Fprintf(w, " rate %016x\n", math.Float64bits(pol.Rate(node, p)))
				fitNodes, fitPlacements = append(fitNodes, node), append(fitPlacements, p)
			}
			fmt.Fprintf(w, "%s g%d scores %v\n", names[pi], gi, scores(pol, fitNodes, fitPlacements))
		}
	}
}

// scores is Rank over the rates of placements[i] on nodes[i], all fitting.
func scores(pol Policy, nodes []Node, placements []Placement) []int64 {
	rates := make([]float64, len(nodes))
	for i := range nodes {
		rates[i] = pol.Rate(nodes[i], placements[i])
	}
	return Rank(rates, nil)
}
