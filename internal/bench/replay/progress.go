package replay

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// progress draws a one-line progress bar (carriage return, no newline until Done). It is
// not safe for concurrent use.
type Progress struct {
	w     io.Writer
	total int
	start time.Time
	last  time.Time
	every time.Duration
	now   func() time.Time
}

// newProgress writes to w (nil: draws nothing) for a run of total pods.
func newProgress(w io.Writer, total int) *Progress {
	return &Progress{w: w, total: total, start: time.Now(), every: 200 * time.Millisecond, now: time.Now}
}

// Update redraws the bar when the last draw is older than the redraw interval.
func (p *Progress) Update(s Step, rec *recorder) {
	if p == nil || p.w == nil {
		return
	}
	now := p.now()
	if now.Sub(p.last) < p.every && s.Index < p.total {
		return
	}
	p.last = now
	fmt.Fprint(p.w, "\r"+p.line(s, rec, now))
}

// Done ends the bar with a newline.
func (p *Progress) Done() {
	if p == nil || p.w == nil {
		return
	}
	fmt.Fprintln(p.w)
}

func (p *Progress) line(s Step, rec *recorder, now time.Time) string {
	const width = 30
	frac := 0.0
	if p.total > 0 {
		frac = float64(s.Index) / float64(p.total)
	}
	filled := int(frac * width)
	if filled > width {
		filled = width
	}
	elapsed := now.Sub(p.start).Seconds()
	rate, eta := 0.0, "?"
	if elapsed > 0 {
		rate = float64(s.Index) / elapsed
	}
	if rate > 0 {
		eta = (time.Duration(float64(p.total-s.Index)/rate) * time.Second).Round(time.Second).String()
	}
	return fmt.Sprintf("[%s%s] %d/%d %5.1f pods/s arrived %6.2f%% allocated %6.2f%% failed %d ETA %s   ",
		strings.Repeat("=", filled), strings.Repeat(" ", width-filled), s.Index, p.total, rate,
		rec.Pct(s.ArrivedMilli), rec.Pct(s.AllocatedMilli), s.Failed, eta)
}
