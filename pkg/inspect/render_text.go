package inspect

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"
)

// Text-rendering helpers shared by the summary, details and pending tables.

// newTable returns a tabwriter with the old tool's settings (two spaces between columns).
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// trimLines removes the trailing blanks tabwriter pads the last cell of a row with.
// The old tool printed them; no parser can depend on invisible blanks, and golden files
// and diffs stay readable without them.
func trimLines(b []byte) []byte {
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return []byte(strings.Join(lines, "\n"))
}

// widest is the width in characters of the longest line of b.
func widest(b []byte) int {
	w := 0
	for _, l := range strings.Split(string(b), "\n") {
		w = max(w, utf8.RuneCountInString(l))
	}
	return w
}

// rule is a dashed line as wide as width (at least 10 dashes).
func rule(width int) string {
	return strings.Repeat("-", max(width, 10)) + "\n"
}

// table renders rows (cells joined by tabs, one row per string) into aligned text.
func table(rows []string) []byte {
	var buf bytes.Buffer
	tw := newTable(&buf)
	for _, r := range rows {
		fmt.Fprintln(tw, r)
	}
	_ = tw.Flush() // writes to a bytes.Buffer cannot fail
	return trimLines(buf.Bytes())
}

// amount prints units, with the unit name appended when the output mixes units
// ("12" or "12GiB").
func amount(v int64, unit string) string {
	return fmt.Sprintf("%d%s", v, unit)
}

// oneLine folds a message onto one line so it fits a table cell.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
