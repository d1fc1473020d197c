package inspect

import (
	"fmt"
	"io"
	"strings"
)

// renderDetails writes the compatible `-d` form: for each node
//
//	NAME:       node
//	IPADDRESS:  10.0.0.1
//
//	NAME        NAMESPACE  GPU0(Allocated)  GPU1(Allocated)  [Pending(Allocated)]
//	trainer     default    8                8
//	Allocated :            16 (50%)
//	Total :                32
//	----------------------------------------------------------
//
// then the cluster line "Allocated/Total GPU Memory In Cluster:  12/14 (85%)". Every pod
// row shows the pod's units on each card of the node (0 where it holds none): a multi-card
// pod has several non-zero cells, a multi-container pod the sum of its containers per card.
// Pending(Allocated) (the old tool's spelling) appears for nodes with pending pods. With
// mixed units the node and cluster amounts carry their unit, as in renderSummary. Errors
// are the writer's.
func renderDetails(w io.Writer, m model) error {
	mixed := mixedUnits(m.Nodes)
	var b strings.Builder
	for _, n := range m.Nodes {
		suffix := ""
		if mixed {
			suffix = n.Unit.String()
		}
		b.WriteString("\n")
		b.Write(table([]string{"NAME:\t" + n.Name, "IPADDRESS:\t" + n.IPAddress}))
		b.WriteString("\n")

		cols := n.maxCardColumns()
		pending := n.PendingAllocated > 0
		head := []string{"NAME", "NAMESPACE"}
		for i := 0; i < cols; i++ {
			head = append(head, fmt.Sprintf("GPU%d(Allocated)", i))
		}
		if pending {
			head = append(head, "Pending(Allocated)")
		}
		rows := []string{strings.Join(head, "\t")}
		for _, p := range n.Pods {
			row := []string{p.Name, p.Namespace}
			for i := 0; i < cols; i++ {
				row = append(row, fmt.Sprint(p.units(i)))
			}
			if pending {
				row = append(row, fmt.Sprint(p.PendingAllocated))
			}
			rows = append(rows, strings.Join(row, "\t"))
		}
		// Same tabwriter block as the pods, like the old tool: the amounts line up under
		// NAMESPACE.
		rows = append(rows,
			fmt.Sprintf("Allocated :\t%s (%d%%)", amount(n.Allocated, suffix), n.Percent),
			fmt.Sprintf("Total :\t%s", amount(n.Total, suffix)))
		body := table(rows)
		b.Write(body)
		b.WriteString(rule(widest(body)))
	}
	b.WriteString("\n\n")
	b.Write(table([]string{clusterHeader + "\t" + clusterLine(m, mixed)}))
	_, err := io.WriteString(w, b.String())
	return err
}
