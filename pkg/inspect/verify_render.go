package inspect

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/gpushare/gpushare/pkg/probe"
)

// verifyRow is one node's outcome; its JSON tags are the -o json/yaml shape.
type verifyRow struct {
	Node string `json:"node"`
	// Handover is how the granted container got its card, as it saw it (env, files,
	// devices).
	Handover string `json:"handover"`
	// Isolation is what the node's labels promise (and what it asked, where share-plugin
	// enforces less).
	Isolation string `json:"isolation"`
	// Cards is the cards the granted container and the sibling saw: "1/0".
	Cards string `json:"cards"`
	// Memory is "<allocated>/<grant> MiB" where the probe measured, else the memory check's
	// verdict.
	Memory  string        `json:"memory"`
	Verdict probe.Verdict `json:"verdict"`
	// Notes are the checks that were not enforced, and why a result is missing.
	Notes   []string      `json:"notes,omitempty"`
	Granted *probe.Result `json:"granted,omitempty"`
	Sibling *probe.Result `json:"sibling,omitempty"`
}

// isolationColumn is the promise of t's labels: the enforced mode, with the mode asked in
// parentheses where they differ.
func isolationColumn(t probeTarget) string {
	promise, err := probe.PromiseOf(t.Isolation, t.Enforced)
	if err != nil {
		return "invalid"
	}
	asked, err := probe.PromiseOf(t.Isolation, "")
	if err == nil && asked != promise {
		return fmt.Sprintf("%s (asks %s)", promise, asked)
	}
	return string(promise)
}

// skippedRow is a node the run placed no pod on.
func skippedRow(t probeTarget, why string) verifyRow {
	return verifyRow{Node: t.Node, Isolation: isolationColumn(t)}.cannot(why)
}

// cannot is the row without a result: cannot verify, for why.
func (r verifyRow) cannot(why string) verifyRow {
	r.Handover, r.Cards, r.Memory = "-", "-", "-"
	r.Verdict = probe.VerdictCannotVerify
	r.Notes = append(r.Notes, why)
	return r
}

// fill sets the columns from the two results: the verdict is the worse of both, and cannot
// verify where one is missing.
func (r verifyRow) fill() verifyRow {
	r.Verdict = probe.VerdictEnforced
	r.Handover, r.Cards, r.Memory = "-", "?", "-"
	granted, sibling := "?", "?"
	for _, res := range []*probe.Result{r.Granted, r.Sibling} {
		if res == nil {
			r.Verdict = r.Verdict.Worse(probe.VerdictCannotVerify)
			continue
		}
		r.Verdict = r.Verdict.Worse(res.Verdict)
		for _, c := range res.Checks {
			if c.Verdict != probe.VerdictEnforced {
				r.Notes = append(r.Notes, fmt.Sprintf("%s %s: %s: %s", res.Role, c.Name, c.Verdict, c.Detail))
			}
		}
	}
	if r.Granted != nil {
		granted = seenColumn(*r.Granted)
		r.Handover = r.Granted.Handover
		r.Memory = memoryColumn(*r.Granted)
	}
	if r.Sibling != nil {
		sibling = seenColumn(*r.Sibling)
	}
	r.Cards = granted + "/" + sibling
	return r
}

// seenColumn is how many cards a container reached: "all" where NVIDIA_VISIBLE_DEVICES=all
// gave it every card of the node, else the cards and device nodes it saw.
func seenColumn(res probe.Result) string {
	if strings.TrimSpace(res.Sight.VisibleDevices) == "all" {
		return "all"
	}
	return fmt.Sprint(max(len(res.Seen), len(res.Sight.DeviceNodes)))
}

// memoryColumn is the most allocated on a card against the grant, or the memory check's
// verdict where nothing was measured.
func memoryColumn(res probe.Result) string {
	if len(res.Measurements) > 0 {
		most := res.Measurements[0].AllocatedMiB
		for _, m := range res.Measurements[1:] {
			most = max(most, m.AllocatedMiB)
		}
		return fmt.Sprintf("%d/%d MiB", most, res.GrantMiB)
	}
	for _, c := range res.Checks {
		if c.Name == probe.CheckMemory {
			return string(c.Verdict)
		}
	}
	return "-"
}

// verifyReport is the rows by node name; the -o json/yaml shape.
type verifyReport struct {
	Nodes []verifyRow `json:"nodes"`
}

func newVerifyReport(rows []verifyRow) verifyReport {
	sort.Slice(rows, func(i, j int) bool { return rows[i].Node < rows[j].Node })
	return verifyReport{Nodes: rows}
}

// err is the run's exit: status 1 when a node is NOT enforced, else 2 when one could not be
// verified, else nil.
func (v verifyReport) err() error {
	var not, cannot int
	for _, r := range v.Nodes {
		switch r.Verdict {
		case probe.VerdictEnforced:
		case probe.VerdictCannotVerify:
			cannot++
		default:
			not++
		}
	}
	switch {
	case not > 0:
		return exitError{code: exitDisagreement, err: fmt.Errorf("isolation NOT enforced on %d of %d node(s)", not, len(v.Nodes))}
	case cannot > 0:
		return exitError{code: exitCheckIncomplete, err: fmt.Errorf("isolation could not be verified on %d of %d node(s)", cannot, len(v.Nodes))}
	}
	return nil
}

// renderVerify writes the table, then each node's notes.
func renderVerify(w io.Writer, v verifyReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tHANDOVER\tISOLATION\tCARDS(GRANTED/SIBLING)\tALLOCATABLE/GRANT\tVERDICT")
	for _, r := range v.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Node, r.Handover, r.Isolation, r.Cards, r.Memory, r.Verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range v.Nodes {
		for _, n := range r.Notes {
			if _, err := fmt.Fprintf(w, "%s: %s\n", r.Node, n); err != nil {
				return err
			}
		}
	}
	return nil
}
