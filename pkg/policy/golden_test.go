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
// placement, score and rate bit of every policy. The trace-replay results depend on every
// card choice and every rate bit for bit: a change here is a change of behaviour, unless
// goldenChoicesDigest holds, when it is a sum of fgd's done in another order (rates moved
// in their last bits, no decision did).
const (
	goldenSeed   = 7
	goldenDigest = "c4363d013291e8c317ce14e55f2b38efc252cf79ea60e5b2945fd06e2f8e2b12"
)

// goldenChoicesDigest is the same stream without the rates' bits (choicesOf): every fit,
// allocation, score and rank. It holds where an optimisation changes rates in their last
// bits (a sum in another order) but no decision.
const goldenChoicesDigest = "f65cb449033380cf8e8d92a31b15416a860bde49381a24ca86e239501a6308a5"

func TestPlacementGoldenDigest(t *testing.T) {
	var out bytes.Buffer
	writeOutcomes(&out, corpus(goldenSeed, 200, 10))
	all, choices := digests(out.Bytes())
	if choices != goldenChoicesDigest {
		t.Errorf("digest of placements and scores = %s, want %s", choices, goldenChoicesDigest)
	}
	if all != goldenDigest {
		t.Errorf("digest of placements, rates and scores = %s, want %s", all, goldenDigest)
	}
}

// rateBits matches a rate's exact bits in the golden streams: " rate 3fe0…" or a bare
// 16-digit hex word at the end of a line.
var rateBits = regexp.MustCompile(`( rate)? [0-9a-f]{16}(\n|$)`)

// choicesOf is a golden stream without the rates' bits.
func choicesOf(out []byte) []byte { return rateBits.ReplaceAll(out, []byte("$2")) }

// digests are the SHA-256 of a golden stream and of its choices (choicesOf), in hex.
func digests(out []byte) (all, choices string) {
	a, c := sha256.Sum256(out), sha256.Sum256(choicesOf(out))
	return hex.EncodeToString(a[:]), hex.EncodeToString(c[:])
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
