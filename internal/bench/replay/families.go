package replay

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
)

// FGDBaseline is the FGD simulator's unallocated GPU % at 100 % arrived workload, mean of
// seeds 42–51, per openb trace family, as published with kubernetes-scheduler-simulator
// (Weng et al., "Beware of Fragmentation", USENIX ATC'23). Lower is better.
var FGDBaseline = map[string]float64{
	"cpu050": 5.00, "cpu100": 4.79, "cpu200": 5.18, "default": 4.77,
	"gpushare40": 6.04, "gpushare60": 8.75, "gpushare80": 10.92,
	"gpuspec10": 5.34, "gpuspec20": 5.34, "gpuspec25": 6.09,
	"multigpu20": 4.47, "multigpu30": 3.64, "multigpu40": 3.09,
}

// Families are FGDBaseline's traces in the published table's order.
var Families = []string{
	"cpu050", "cpu100", "cpu200", "default", "gpushare40", "gpushare60", "gpushare80",
	"gpuspec10", "gpuspec20", "gpuspec25", "multigpu20", "multigpu30", "multigpu40",
}

// FamilyRow is one family: ours (nil when not run) against FGD's figure and the bound
// (nil when not computed; bound.json, RunBound).
type FamilyRow struct {
	Trace string
	Ours  *Cell
	FGD   float64
	Bound *Cell
}

// WithBounds sets each row's bound from bounds (trace → cell, CollectBounds).
func WithBounds(rows []FamilyRow, bounds map[string]*Cell) []FamilyRow {
	for i := range rows {
		if c := bounds[rows[i].Trace]; c != nil && c.Runs > 0 {
			rows[i].Bound = c
		}
	}
	return rows
}

// Modes are the modes of t, sorted.
func (t Table) Modes() []string { return sortedKeys(t) }

// FamilyRows picks mode and policy from t, one row per family in Families' order.
func (t Table) FamilyRows(mode, policy string) []FamilyRow {
	rows := make([]FamilyRow, 0, len(Families))
	for _, tr := range Families {
		r := FamilyRow{Trace: tr, FGD: FGDBaseline[tr]}
		if c := t[mode][policy][tr]; c != nil && c.Runs > 0 {
			r.Ours = c
		}
		rows = append(rows, r)
	}
	return rows
}

// FamilySummary is what the family table's last rows say: over the families run, the mean
// of ours and of FGD, ours' relative difference (negative: better), and how many families
// are at or below FGD's figure.
type FamilySummary struct {
	Families, AtOrBelow int
	Ours, FGD           float64
	Relative            float64 // (Ours - FGD) / FGD
}

// Summarize aggregates the rows that were run.
func Summarize(rows []FamilyRow) FamilySummary {
	var s FamilySummary
	for _, r := range rows {
		if r.Ours == nil {
			continue
		}
		s.Families++
		s.Ours += r.Ours.Mean
		s.FGD += r.FGD
		if r.Ours.Mean <= r.FGD {
			s.AtOrBelow++
		}
	}
	if s.Families > 0 {
		s.Ours /= float64(s.Families)
		s.FGD /= float64(s.Families)
		s.Relative = (s.Ours - s.FGD) / s.FGD
	}
	return s
}

// WriteFamilies writes the family table: ours (mean ± sd, runs, pods/s) next to FGD's
// published figure, the difference, and the summary over the families run. When some row
// has a bound, the table also has the bound (mean ± sd over its seeds) and ours' and FGD's
// distance to it.
func WriteFamilies(w io.Writer, label string, rows []FamilyRow) error {
	withBound := slices.ContainsFunc(rows, func(r FamilyRow) bool { return r.Bound != nil })
	var b strings.Builder
	fmt.Fprintf(&b, "Unallocated GPU %% at 100 %% arrived workload: %s vs FGD (published, seeds 42–51)", label)
	if withBound {
		b.WriteString(" and the bound no scheduler can beat (internal/bench/bound)")
	}
	b.WriteString("\n\n")
	if withBound {
		b.WriteString("| trace | bound | ours | FGD | ours − FGD | ours/FGD | ours − bound | FGD − bound | pods/s |\n|---|---|---|---|---|---|---|---|---|\n")
	} else {
		b.WriteString("| trace | ours | FGD | ours − FGD | ours/FGD | pods/s |\n|---|---|---|---|---|---|\n")
	}
	var boundSum, fgdSum, oursSum float64
	var bounded, bothBounded int
	for _, r := range rows {
		bnd := ""
		if withBound {
			bnd = " – |"
			if r.Bound != nil {
				bnd = " " + meanCell(r.Bound) + " |"
				bounded++
				boundSum += r.Bound.Mean
				fgdSum += r.FGD
			}
		}
		if r.Ours == nil {
			fmt.Fprintf(&b, "| %s |%s – | %.2f | | |", r.Trace, bnd, r.FGD)
			if withBound {
				b.WriteString(" |" + boundDiff(r.FGD, r.Bound) + " |")
			}
			b.WriteString(" |\n")
			continue
		}
		mark := ""
		if r.Ours.Mean <= r.FGD {
			mark = " ✓"
		}
		fmt.Fprintf(&b, "| %s |%s %s | %.2f | %+.2f%s | %.3f |", r.Trace, bnd, meanCell(r.Ours), r.FGD, r.Ours.Mean-r.FGD, mark, r.Ours.Mean/r.FGD)
		if withBound {
			fmt.Fprintf(&b, "%s |%s |", boundDiff(r.Ours.Mean, r.Bound), boundDiff(r.FGD, r.Bound))
			if r.Bound != nil {
				bothBounded++
				oursSum += r.Ours.Mean - r.Bound.Mean
			}
		}
		fmt.Fprintf(&b, " %.0f |\n", r.Ours.PodsPerSec)
	}
	s := Summarize(rows)
	if s.Families > 0 {
		if withBound {
			fmt.Fprintf(&b, "| **mean of %d** | | **%.2f** | **%.2f** | **%+.2f** (%+.1f %%) | %.3f | | | |\n", s.Families, s.Ours, s.FGD, s.Ours-s.FGD, 100*s.Relative, s.Ours/s.FGD)
		} else {
			fmt.Fprintf(&b, "| **mean of %d** | **%.2f** | **%.2f** | **%+.2f** (%+.1f %%) | %.3f | |\n", s.Families, s.Ours, s.FGD, s.Ours-s.FGD, 100*s.Relative, s.Ours/s.FGD)
		}
		fmt.Fprintf(&b, "\nAt or below FGD on %d of %d families.\n", s.AtOrBelow, s.Families)
	}
	if bounded > 0 {
		fmt.Fprintf(&b, "\nBound: mean %.2f over %d families; FGD − bound: mean %+.2f.", boundSum/float64(bounded), bounded, (fgdSum-boundSum)/float64(bounded))
		if bothBounded > 0 {
			fmt.Fprintf(&b, " Ours − bound: mean %+.2f over %d families.", oursSum/float64(bothBounded), bothBounded)
		}
		b.WriteString("\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing family table: %w", err)
	}
	return nil
}

// meanCell is "mean ± sd (runs)", or "mean (1)" for one run.
func meanCell(c *Cell) string {
	if c.Runs > 1 {
		return fmt.Sprintf("%.2f ± %.2f (%d)", c.Mean, c.SD, c.Runs)
	}
	return fmt.Sprintf("%.2f (1)", c.Mean)
}

// boundDiff is " v − bound" as a signed figure, or "" without a bound.
func boundDiff(v float64, bound *Cell) string {
	if bound == nil {
		return ""
	}
	return fmt.Sprintf(" %+.2f", v-bound.Mean)
}

// WriteFamiliesSVG draws one pair of bars per family: ours (with its sd as a whisker) and
// FGD's published figure.
func WriteFamiliesSVG(w io.Writer, title string, rows []FamilyRow) error {
	const (
		left, top, bot, right = 60, 50, 80, 20
		plotH, groupW, barW   = 320, 56, 22
	)
	yMax := 1.0
	for _, r := range rows {
		yMax = math.Max(yMax, r.FGD)
		if r.Ours != nil {
			yMax = math.Max(yMax, r.Ours.Mean+r.Ours.SD)
		}
	}
	yMax = math.Ceil(yMax/2) * 2
	plotW := groupW * len(rows)
	width, height := left+plotW+right, top+plotH+bot
	py := func(y float64) float64 { return top + (1-y/yMax)*plotH }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	fmt.Fprintf(&b, `<rect x="%d" y="30" width="12" height="12" fill="%s"/><text x="%d" y="40">ours</text>`+"\n", left, palette[0], left+16)
	fmt.Fprintf(&b, `<rect x="%d" y="30" width="12" height="12" fill="%s"/><text x="%d" y="40">FGD (published)</text>`+"\n", left+60, palette[7], left+76)
	for y := 0.0; y <= yMax+1e-9; y += 2 {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>`+"\n", left, py(y), left+plotW, py(y))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%.0f</text>`+"\n", left-6, py(y)+4, y)
	}
	fmt.Fprintf(&b, `<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle">unallocated GPU %% at 100 %% arrival</text>`+"\n", top+plotH/2.0)
	for i, r := range rows {
		x := left + i*groupW + (groupW-2*barW)/2
		if r.Ours != nil {
			fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"/>`+"\n", x, py(r.Ours.Mean), barW, py(0)-py(r.Ours.Mean), palette[0])
			if r.Ours.Runs > 1 && r.Ours.SD > 0 {
				cx := float64(x) + barW/2.0
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", cx, py(r.Ours.Mean+r.Ours.SD), cx, py(math.Max(0, r.Ours.Mean-r.Ours.SD)))
			}
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"/>`+"\n", x+barW, py(r.FGD), barW, py(0)-py(r.FGD), palette[7])
		fmt.Fprintf(&b, `<text transform="translate(%d %d) rotate(-40)" text-anchor="end">%s</text>`+"\n", x+barW, top+plotH+14, html.EscapeString(r.Trace))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", left, top, plotW, plotH)
	b.WriteString("</svg>\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing family chart: %w", err)
	}
	return nil
}
