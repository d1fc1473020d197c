package replay

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpushare/gpushare/pkg/policy"
)

// Reservation holds whole cards back for whole-card pods: while fewer than Cards of the
// cluster's cards hold no pod, a single-card fractional pod of MinMilli..MaxMilli GPU-milli
// may only go onto cards that already hold one, and fails where none has room. The pods it
// turns away fit somewhere, so it measures the most that holding cards back could gain
// (run with several Cards and ranges, the best of them in hindsight); the product has no
// such reservation. The zero value reserves nothing.
type Reservation struct {
	Cards              int   // whole free cards below which the range is restricted; 0: off
	MinMilli, MaxMilli int64 // the restricted pods' gpu_milli, inclusive
}

// ParseReservationRange parses "LO-HI" in GPU-milli (1 ≤ LO ≤ HI ≤ 999) into r's range.
// Errors: not two integers joined by "-", or out of that range.
func (r *Reservation) ParseReservationRange(s string) error {
	lo, hi, ok := strings.Cut(s, "-")
	if !ok {
		return fmt.Errorf("reservation range %q: want LO-HI in GPU-milli", s)
	}
	a, errA := strconv.ParseInt(lo, 10, 64)
	b, errB := strconv.ParseInt(hi, 10, 64)
	if errA != nil || errB != nil || !validRange(a, b) {
		return fmt.Errorf("reservation range %q: want LO-HI with 1 ≤ LO ≤ HI ≤ 999 GPU-milli", s)
	}
	r.MinMilli, r.MaxMilli = a, b
	return nil
}

// validRange: a fractional single-card size range, 1 ≤ lo ≤ hi ≤ 999 GPU-milli (1000 is a
// whole card, which a reservation keeps cards for).
func validRange(lo, hi int64) bool { return 1 <= lo && lo <= hi && hi <= 999 }

// String is the mode suffix a run with r records: "" when off, "-reserve<cards>-<lo>-<hi>".
func (r Reservation) String() string {
	if r.Cards <= 0 {
		return ""
	}
	return fmt.Sprintf("-reserve%d-%d-%d", r.Cards, r.MinMilli, r.MaxMilli)
}

// check reports a reservation that cannot apply: a negative count, an empty range while on,
// the DRA path (whose cards kube-scheduler's allocator picks), or beside a defragmenter
// (whose moves would place pods around it).
func (r Reservation) check(dra string, defrag int) error {
	switch {
	case r.Cards < 0:
		return fmt.Errorf("offline reservation of %d cards: want 0 or more", r.Cards)
	case r.Cards > 0 && !validRange(r.MinMilli, r.MaxMilli):
		return fmt.Errorf("offline reservation range %d-%d GPU-milli: want 1 ≤ LO ≤ HI ≤ 999", r.MinMilli, r.MaxMilli)
	case r.Cards > 0 && dra != "":
		return fmt.Errorf("offline reservation: device-plugin path only, not with the DRA path %q", dra)
	case r.Cards > 0 && defrag > 0:
		return fmt.Errorf("offline reservation: not with a defragmenter (budget %d)", defrag)
	}
	return nil
}

// restricts reports whether pod may only go onto cards that hold a pod now.
func (r Reservation) restricts(o *offline, pod PodSpec) bool {
	if r.Cards <= 0 || pod.NumGPU != 1 || pod.GPUMilli < r.MinMilli || pod.GPUMilli > r.MaxMilli {
		return false
	}
	free := 0
	for _, n := range o.state {
		for _, c := range n.policy.Cards {
			if c.Used == 0 && c.Healthy {
				if free++; free >= r.Cards {
					return false
				}
			}
		}
	}
	return true
}

// usedCards is n with only the cards that hold a pod: what a restricted pod may take. Card
// indices are kept, so a placement on the view applies to n.
func usedCards(n policy.Node) policy.Node {
	v := n
	v.Cards = make([]policy.Card, 0, len(n.Cards))
	for _, c := range n.Cards {
		if c.Used > 0 {
			v.Cards = append(v.Cards, c)
		}
	}
	return v
}
