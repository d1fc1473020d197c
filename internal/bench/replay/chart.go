package replay

import (
	"encoding/csv"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Point is one (arrived %, allocated %) sample.
type Point struct{ Arrived, Allocated float64 }

// Series is one line of the chart.
type Series struct {
	Label  string
	Runs   int      // result folders averaged into it
	At100  *float64 // mean unallocated % at 100 % arrival over the runs that reached it
	Points []Point
}

// readSteps reads the arrived_pct and allocated_pct columns of a steps.csv.
func readSteps(path string) ([]Point, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading steps: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: header: %w", path, err)
	}
	ai, li := -1, -1
	for i, h := range header {
		switch h {
		case "arrived_pct":
			ai = i
		case "allocated_pct":
			li = i
		}
	}
	if ai < 0 || li < 0 {
		return nil, fmt.Errorf("%s: header lacks arrived_pct or allocated_pct", path)
	}
	var pts []Point
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(rec) <= ai || len(rec) <= li {
			line, _ := r.FieldPos(0)
			return nil, fmt.Errorf("%s: line %d: too few fields", path, line)
		}
		a, err1 := strconv.ParseFloat(rec[ai], 64)
		l, err2 := strconv.ParseFloat(rec[li], 64)
		if err1 != nil || err2 != nil {
			line, _ := r.FieldPos(0)
			return nil, fmt.Errorf("%s: line %d: bad number", path, line)
		}
		pts = append(pts, Point{a, l})
	}
	return pts, nil
}

// LoadSeries reads result folders (summary.json + steps.csv) and groups them by policy and
// mode (labelled "policy [mode]"): folders of one group (several seeds) are
// averaged on a 0.5 % grid of arrived %. Without summary.json the folder name is the label.
func LoadSeries(dirs []string) ([]Series, error) {
	type group struct {
		runs  [][]Point
		at100 []float64
	}
	groups := map[string]*group{}
	var order []string
	for _, dir := range dirs {
		label := filepath.Base(filepath.Clean(dir))
		var at100 *float64
		if s, err := readSummary(dir); err == nil {
			if s.Policy != "" {
				label = s.Policy
			}
			if s.Mode != "" {
				label += " [" + s.Mode + "]"
			}
			at100 = s.UnallocatedAt100
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		pts, err := readSteps(filepath.Join(dir, "steps.csv"))
		if err != nil {
			return nil, err
		}
		g := groups[label]
		if g == nil {
			g = &group{}
			groups[label] = g
			order = append(order, label)
		}
		g.runs = append(g.runs, pts)
		if at100 != nil {
			g.at100 = append(g.at100, *at100)
		}
	}
	out := make([]Series, 0, len(order))
	for _, label := range order {
		g := groups[label]
		s := Series{Label: label, Runs: len(g.runs), Points: averageRuns(g.runs, 0.5)}
		if len(g.at100) > 0 {
			var sum float64
			for _, v := range g.at100 {
				sum += v
			}
			m := sum / float64(len(g.at100))
			s.At100 = &m
		}
		out = append(out, s)
	}
	return out, nil
}

// averageRuns samples each run's allocated % at grid steps of arrived % (the last sample at
// or before the grid point) and averages the runs that reach that point.
func averageRuns(runs [][]Point, grid float64) []Point {
	if len(runs) == 1 {
		return runs[0]
	}
	maxArrived := 0.0
	for _, r := range runs {
		if len(r) > 0 && r[len(r)-1].Arrived > maxArrived {
			maxArrived = r[len(r)-1].Arrived
		}
	}
	var out []Point
	for x := 0.0; x <= maxArrived+grid/2; x += grid {
		var sum float64
		n := 0
		for _, r := range runs {
			i := sort.Search(len(r), func(i int) bool { return r[i].Arrived > x })
			if i == 0 || (i == len(r) && r[len(r)-1].Arrived < x-grid) {
				continue
			}
			sum += r[i-1].Allocated
			n++
		}
		if n > 0 {
			out = append(out, Point{x, sum / float64(n)})
		}
	}
	return out
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"}

// WriteSVG draws allocated % against arrived % with one line per series, the ideal
// diagonal and a marker at 100 % arrival.
func WriteSVG(w io.Writer, title string, series []Series) error {
	// The legend sits right of the plot; widen the canvas for long labels (≈ 7 px a char).
	labels := make([]string, len(series))
	right := 230
	for i, s := range series {
		labels[i] = s.Label
		if s.At100 != nil {
			labels[i] += fmt.Sprintf(" (%.2f%% unalloc. @100%%", *s.At100)
			if s.Runs > 1 {
				labels[i] += fmt.Sprintf(", %d runs", s.Runs)
			}
			labels[i] += ")"
		}
		right = max(right, 60+7*len(labels[i]))
	}
	const (
		plotW, plotH = 560, 420
		left, top    = 70, 40
		bot          = 60
		yMax         = 100.0
	)
	width, height := left+plotW+right, top+plotH+bot
	xMax := 100.0
	for _, s := range series {
		for _, p := range s.Points {
			xMax = math.Max(xMax, p.Arrived)
		}
	}
	xMax = math.Ceil(xMax/10) * 10
	px := func(x float64) float64 { return left + x/xMax*plotW }
	py := func(y float64) float64 { return top + (1-y/yMax)*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	for x := 0.0; x <= xMax+1e-9; x += 10 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e5e5e5"/>`+"\n", px(x), top, px(x), top+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%.0f</text>`+"\n", px(x), top+plotH+18, x)
	}
	for y := 0.0; y <= yMax+1e-9; y += 10 {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>`+"\n", left, py(y), left+plotW, py(y))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%.0f</text>`+"\n", left-6, py(y)+4, y)
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", left, top, plotW, plotH)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999" stroke-dasharray="4 4"/>`+"\n", px(0), py(0), px(100), py(100))
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#555" stroke-dasharray="2 3"/>`+"\n", px(100), top, px(100), top+plotH)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">arrived GPU request (%% of cluster GPUs)</text>`+"\n", left+plotW/2.0, height-18)
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">allocated GPU (%%)</text>`+"\n", top+plotH/2.0)

	for i, s := range series {
		color := palette[i%len(palette)]
		var pts strings.Builder
		for j, p := range thin(s.Points, 2000) {
			if j > 0 {
				pts.WriteByte(' ')
			}
			fmt.Fprintf(&pts, "%.1f,%.1f", px(p.Arrived), py(math.Min(p.Allocated, yMax)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="%s"/>`+"\n", color, pts.String())
		ly := top + 10 + i*22
		label := labels[i]
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", left+plotW+12, ly, left+plotW+32, ly, color)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", left+plotW+38, ly+4, html.EscapeString(label))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("writing chart: %w", err)
	}
	return nil
}

// thin keeps at most max points, evenly spaced, always the last.
func thin(pts []Point, max int) []Point {
	if len(pts) <= max {
		return pts
	}
	out := make([]Point, 0, max+1)
	step := float64(len(pts)) / float64(max)
	for f := 0.0; int(f) < len(pts); f += step {
		out = append(out, pts[int(f)])
	}
	if out[len(out)-1] != pts[len(pts)-1] {
		out = append(out, pts[len(pts)-1])
	}
	return out
}
