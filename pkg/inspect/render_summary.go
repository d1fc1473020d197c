package inspect

import (
	"fmt"
	"io"
	"strings"
)

// clusterHeader is the line scripts of the old tool look for; keep it byte for byte.
const clusterHeader = "Allocated/Total GPU Memory In Cluster:"

// renderSummary writes the compatible summary table:
//
//	NAME  IPADDRESS  GPU0(Allocated/Total)  …  [PENDING(Allocated)]  GPU Memory(GiB)
//	node  10.0.0.1   12/14                     0                     12/14
//	---------------------------------------------------------------------
//	Allocated/Total GPU Memory In Cluster:
//	12/14 (85%)
//
// There is one GPUn column per card index up to the highest on any node; a node without
// that card shows 0/0. Unhealthy cards read "4/16(unhealthy)", cards only pods' annotations
// know "4/0(missing)". PENDING appears when some node has bound pods without a card
// annotation. When every node uses one unit the header names it (GPU Memory(GiB)); when
// units differ the header is "GPU Memory" and each node's amounts carry their unit
// ("12/14GiB"), and the cluster line is in the largest unit dividing all of them
// ("12288/29415MiB (41%)"). Errors are the writer's.
func renderSummary(w io.Writer, m model) error {
	mixed := mixedUnits(m.Nodes)
	cols, pending := 0, false
	for _, n := range m.Nodes {
		cols = max(cols, n.maxCardColumns())
		pending = pending || n.PendingAllocated > 0
	}

	head := []string{"NAME", "IPADDRESS"}
	for i := 0; i < cols; i++ {
		head = append(head, fmt.Sprintf("GPU%d(Allocated/Total)", i))
	}
	if pending {
		head = append(head, "PENDING(Allocated)")
	}
	if mixed {
		head = append(head, "GPU Memory")
	} else {
		head = append(head, fmt.Sprintf("GPU Memory(%s)", m.Totals.Unit))
	}
	rows := []string{strings.Join(head, "\t")}

	for _, n := range m.Nodes {
		suffix := ""
		if mixed {
			suffix = n.Unit.String()
		}
		row := []string{n.Name, n.IPAddress}
		for i := 0; i < cols; i++ {
			row = append(row, cardCell(n, i))
		}
		if pending {
			row = append(row, fmt.Sprint(n.PendingAllocated))
		}
		row = append(row, fmt.Sprintf("%d/%s", n.Allocated, amount(n.Total, suffix)))
		rows = append(rows, strings.Join(row, "\t"))
	}

	body := table(rows)
	var b strings.Builder
	b.Write(body)
	b.WriteString(rule(widest(body)))
	b.WriteString(clusterHeader + "\n")
	b.WriteString(clusterLine(m, mixed) + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// cardCell is "allocated/total" of card i, marked when the card is unhealthy or unknown to
// the inventory.
func cardCell(n nodeUsage, i int) string {
	c, ok := n.card(i)
	if !ok {
		return "0/0"
	}
	s := fmt.Sprintf("%d/%d", c.Allocated, c.Total)
	switch {
	case c.Missing:
		s += "(missing)"
	case !c.Healthy:
		s += "(unhealthy)"
	}
	return s
}

// clusterLine is "12/14 (85%)", with the unit appended to the total when units are mixed.
func clusterLine(m model, mixed bool) string {
	suffix := ""
	if mixed {
		suffix = m.Totals.Unit.String()
	}
	return fmt.Sprintf("%d/%s (%d%%)", m.Totals.Allocated, amount(m.Totals.Total, suffix), m.Totals.Percent)
}
