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
	"strconv"
	"strings"
)

// ChurnLine is one line of the churn chart: allocated GPU % (Point.Allocated) against
// replay time in seconds (Point.Arrived holds the time).
type ChurnLine struct {
	Label  string
	Points []Point
}

// ReadChurnSeries reads the time_s and allocated_pct columns of dir/churn-series.csv.
func ReadChurnSeries(dir string) ([]Point, error) {
	path := filepath.Join(dir, "churn-series.csv")
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading churn series: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: header: %w", path, err)
	}
	if len(header) < 2 || header[0] != "time_s" || header[1] != "allocated_pct" {
		return nil, fmt.Errorf("%s: header %v: want time_s, allocated_pct first", path, header)
	}
	var pts []Point
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return pts, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		t, err1 := strconv.ParseFloat(rec[0], 64)
		a, err2 := strconv.ParseFloat(rec[1], 64)
		if err1 != nil || err2 != nil {
			line, _ := r.FieldPos(0)
			return nil, fmt.Errorf("%s: line %d: bad number", path, line)
		}
		pts = append(pts, Point{Arrived: t, Allocated: a})
	}
}

// WriteChurnSVG draws allocated GPU % over replay time (minutes), one line per scheduler,
// from from to to (seconds; to <= from: the longest line's end), in the style of WriteSVG.
func WriteChurnSVG(w io.Writer, title string, lines []ChurnLine, from, to float64) error {
	const (
		plotW, plotH = 560, 420
		left, top    = 70, 40
		bot, right   = 60, 230
		yMax         = 100.0
	)
	if to <= from {
		for _, l := range lines {
			if n := len(l.Points); n > 0 {
				to = math.Max(to, l.Points[n-1].Arrived)
			}
		}
	}
	// Whole minutes, the span a multiple of 10.
	m0 := math.Floor(from / 60)
	minutes := math.Max(10, math.Ceil((to/60-m0)/10)*10)
	width, height := left+plotW+right, top+plotH+bot
	px := func(s float64) float64 { return left + (s/60-m0)/minutes*plotW }
	py := func(y float64) float64 { return top + (1-y/yMax)*plotH }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	step := minutes / 10
	for x := m0; x <= m0+minutes+1e-9; x += step {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e5e5e5"/>`+"\n", px(x*60), top, px(x*60), top+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%.0f</text>`+"\n", px(x*60), top+plotH+18, x)
	}
	for y := 0.0; y <= yMax+1e-9; y += 10 {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>`+"\n", left, py(y), left+plotW, py(y))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%.0f</text>`+"\n", left-6, py(y)+4, y)
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", left, top, plotW, plotH)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">replay time (minutes)</text>`+"\n", left+plotW/2.0, height-18)
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">allocated GPU (%%)</text>`+"\n", top+plotH/2.0)
	for i, l := range lines {
		color := palette[i%len(palette)]
		var pts strings.Builder
		for _, p := range thin(clip(l.Points, m0*60, (m0+minutes)*60), 600) {
			fmt.Fprintf(&pts, "%.1f,%.1f ", px(p.Arrived), py(math.Min(p.Allocated, yMax)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", color, strings.TrimSpace(pts.String()))
		ly := top + 10 + i*22
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", left+plotW+12, ly, left+plotW+32, ly, color)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", left+plotW+38, ly+4, html.EscapeString(l.Label))
	}
	b.WriteString("</svg>\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing churn chart: %w", err)
	}
	return nil
}

// clip keeps the points from from to to (seconds), led by the last point before from: the
// value at from.
func clip(pts []Point, from, to float64) []Point {
	var out []Point
	for i, p := range pts {
		if p.Arrived > to {
			break
		}
		if p.Arrived >= from {
			if len(out) == 0 && i > 0 && p.Arrived > from {
				out = append(out, Point{Arrived: from, Allocated: pts[i-1].Allocated})
			}
			out = append(out, p)
		}
	}
	return out
}
