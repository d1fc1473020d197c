package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"regexp"
	"testing"
)

// goldenDigest is the SHA-256 of writeOutcomes over corpus(goldenSeed, 200, 10): every
// placement and score bit of every policy. The trace-replay results depend on every card
// choice and every score bit for bit: a change here is a change of behaviour, unless
// goldenChoicesDigest holds, when it is a sum of fgd's done in another order (scores moved
// in their last bits, no decision did).
const (
	goldenSeed   = 7
	goldenDigest = "c4363d013291e8c317ce14e55f2b38efc252cf79ea60e5b2945fd06e2f8e2b12"
)

// goldenChoicesDigest is the same stream without the scores' bits (choicesOf): every fit,
// allocation, standalone score and normalized score. It holds where an optimisation changes
// scores in their last bits (a sum in another order) but no decision.
const goldenChoicesDigest = "f65cb449033380cf8e8d92a31b15416a860bde49381a24ca86e239501a6308a5"

func TestPlacementGoldenDigest(t *testing.T) {
	var out bytes.Buffer
	writeOutcomes(&out, corpus(goldenSeed, 200, 10))
	all, choices := digests(out.Bytes())
	if choices != goldenChoicesDigest {
		t.Errorf("digest of placements and scores = %s, want %s", choices, goldenChoicesDigest)
	}
	if all != goldenDigest {
		t.Errorf("digest of placements and score bits = %s, want %s", all, goldenDigest)
	}
}

// scoreBits matches a score's exact bits in the golden streams: " rate 3fe0…" (the streams'
// label for a score, part of the digests) or a bare 16-digit hex word at the end of a line.
var scoreBits = regexp.MustCompile(`( rate)? [0-9a-f]{16}(\n|$)`)

// choicesOf is a golden stream without the scores' bits.
func choicesOf(out []byte) []byte { return scoreBits.ReplaceAll(out, []byte("$2")) }

// digests are the SHA-256 of a golden stream and of its choices (choicesOf), in hex.
func digests(out []byte) (all, choices string) {
	a, c := sha256.Sum256(out), sha256.Sum256(choicesOf(out))
	return hex.EncodeToString(a[:]), hex.EncodeToString(c[:])
}

// writeOutcomes writes every policy's answer for every node of every group: fit's and
// Place's error or allocation and usage, standaloneScore and Score's exact bits; then
// NormalizeScores over each group's fitting nodes.
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
				fmt.Fprintf(w, "alloc %v usage %v score %d", p.Allocation, p.Usage, standaloneScore(pol, node, p))
				fmt.Fprintf(w, " rate %016x\n", math.Float64bits(pol.Score(node, p)))
				fitNodes, fitPlacements = append(fitNodes, node), append(fitPlacements, p)
			}
			fmt.Fprintf(w, "%s g%d scores %v\n", names[pi], gi, normalizedScores(pol, fitNodes, fitPlacements))
		}
	}
}

// normalizedScores is NormalizeScores over the scores of placements[i] on nodes[i], all
// fitting.
func normalizedScores(pol Policy, nodes []Node, placements []Placement) []int64 {
	scores := make([]float64, len(nodes))
	for i := range nodes {
		scores[i] = pol.Score(nodes[i], placements[i])
	}
	return NormalizeScores(scores, nil)
}

// standaloneScore is the 0..MaxScore integer of p on node judged alone, without the other
// nodes, that the golden stream pins beside each score: binpack's and spread's score (a
// share in [0,1]) on that scale, bestfit's the node's used share after the placement, fgd's
// binpack's. The offline replay's TiesRandomScore builds the same integers from the exported
// API.
func standaloneScore(pol Policy, node Node, p Placement) int64 {
	v := pol.Score(node, p)
	switch pol.(type) {
	case bestfit:
		var buf [16]int64
		_, v = fullness(node, usageOf(node, p, buf[:0]))
	case fgd:
		v = binpack{}.Score(node, p)
	}
	s := int64(v*float64(maxScore) + 0.5)
	return min(max(s, 0), maxScore)
}
