package bound

import "fmt"

// dff is a dual-feasible function on integer sizes 0..capacity, scaled to [0, 1]: for any
// items whose sizes sum to at most capacity, the values sum to at most 1 (Fekete and
// Schepers 2001, Definition 1, with sizes divided by capacity). Hence, for any bins of one
// capacity holding items, the items' values sum to at most the number of bins: a valid
// inequality for every integer packing.
type dff struct {
	name string
	of   func(size int64) float64
}

// dffs returns the functions tried on bins of capacity c holding items of the given
// sizes (each in 0..c): U^(ε) for every ε at which an item changes value, u^(k) for
// k = 1..maxK, and each u^(k) ∘ U^(ε). The identity (the plain capacity row) is not among
// them.
func dffs(c int64, sizes []int64, maxK int) []dff {
	var out []dff
	seen := map[int64]bool{}
	for _, v := range sizes {
		// U^(ε) changes where an item drops to 0 (ε just above v) or rises to 1 (ε just
		// above c − v); in integers, e = v+1 and e = c−v+1, with ε = e/c ≤ 1/2.
		for _, e := range []int64{v + 1, c - v + 1} {
			if e < 1 || 2*e > c || seen[e] {
				continue
			}
			seen[e] = true
			out = append(out, uEps(c, e))
		}
	}
	eps := len(out)
	for k := 1; k <= maxK; k++ {
		out = append(out, uK(c, int64(k)))
		for _, u := range out[:eps] {
			out = append(out, composed(u, uK(c, int64(k))))
		}
	}
	return out
}

// composed is outer ∘ inner for U^(ε) inner (Fekete and Schepers 2001, Lemma 2: a
// composition of dual-feasible functions is one). U^(ε) keeps a middle item's size, so
// outer sees its integer size, and outer(0) = 0, outer(whole bin) = 1.
func composed(inner, outer dff) dff {
	return dff{name: outer.name + "∘" + inner.name, of: func(v int64) float64 {
		switch u := inner.of(v); u {
		case 0, 1:
			return u
		default:
			return outer.of(v)
		}
	}}
}

// uEps is Fekete and Schepers' U^(ε) (2001, Theorem 2) with ε = e/c, 1 ≤ 2e ≤ c: an item
// larger than c − e counts as a whole bin, one smaller than e as nothing, any other as its
// size. Dual-feasible: at most one item exceeds c − e ≥ c/2 and then the others sum to less
// than e, so they are all below e and count 0.
func uEps(c, e int64) dff {
	return dff{name: fmt.Sprintf("U^(%d/%d)", e, c), of: func(v int64) float64 {
		switch {
		case v > c-e:
			return 1
		case v < e:
			return 0
		default:
			return float64(v) / float64(c)
		}
	}}
}

// uK is Fekete and Schepers' u^(k) (2001, Theorem 1), k ≥ 1: an item of size x = v/c
// counts x when (k+1)x is an integer and ⌊(k+1)x⌋/k otherwise. Computed in integers, so
// that the test "(k+1)x is an integer" is exact.
func uK(c, k int64) dff {
	return dff{name: fmt.Sprintf("u^(%d)", k), of: func(v int64) float64 {
		if (k+1)*v%c == 0 {
			return float64(v) / float64(c)
		}
		return float64((k+1)*v/c) / float64(k)
	}}
}
