package inspect

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/gpushare/gpushare/pkg/gpushare"
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
// Pending(Allocated) (the old tool's spelling) appears for nodes with pending pods. A pod
// with a memory limit on a card says it in its cell ("4 (limit 10)"), and its node has a
// "Limits :" line with what the pods of each such card may allocate beside its size. A pod
// with a compute share on a card says it too ("4 (core 25%)"), and its node has a
// "Compute :" line with the share each such card's pods hold. A node
// with pods that choose their cards by annotation lists them in a CARD CHOICE block, a DRA
// node its allocated claims in a CLAIMS block. With
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
		b.Write(table(nodeHeader(n)))
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
				row = append(row, fmt.Sprint(p.units(i))+limitNote(p, i)+computeNote(p, i)+usedNote(p, i))
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
		if l := limitsLine(n, suffix); l != "" {
			rows = append(rows, l)
		}
		if l := computeLine(n); l != "" {
			rows = append(rows, l)
		}
		body := table(rows)
		b.Write(body)
		width := widest(body)
		if notes := cardChoices(n.Pods); notes != nil {
			b.Write(notes)
			width = max(width, widest(notes))
		}
		if notes := claimLines(n.Claims); notes != nil {
			b.Write(notes)
			width = max(width, widest(notes))
		}
		b.WriteString(rule(width))
	}
	b.WriteString("\n\n")
	b.Write(table([]string{clusterHeader + "\t" + clusterLine(m, mixed)}))
	_, err := io.WriteString(w, b.String())
	return err
}

// cardChoices is the CARD CHOICE block of a node whose pods choose their cards by
// annotation, one pod a line ("CARD CHOICE:  ml/small  gpushare.io/card-policy=spread"); nil
// when none does, so that such nodes print as before.
func cardChoices(pods []podUsage) []byte {
	var rows []string
	for _, p := range pods {
		if p.cardChoice == "" {
			continue
		}
		head := ""
		if rows == nil {
			head = "CARD CHOICE:"
		}
		rows = append(rows, head+"\t"+p.Namespace+"/"+p.Name+"\t"+p.cardChoice)
	}
	if rows == nil {
		return nil
	}
	return table(rows)
}

// claimLines is the CLAIMS block of a DRA node, one claim a line with its memory per card
// and the pods reserving it ("CLAIMS:  ml/nb-gpu  GPU0 4  ml/nb"); nil without claims.
func claimLines(claims []claimUsage) []byte {
	var rows []string
	for _, c := range claims {
		head := ""
		if rows == nil {
			head = "CLAIMS:"
		}
		cards := make([]string, 0, len(c.Cards))
		for _, pc := range c.Cards {
			cards = append(cards, fmt.Sprintf("GPU%d %d", pc.Index, pc.Allocated))
		}
		pods := make([]string, 0, len(c.Pods))
		for _, p := range c.Pods {
			pods = append(pods, c.Namespace+"/"+p)
		}
		if len(pods) == 0 {
			pods = append(pods, "(no pod)")
		}
		rows = append(rows, head+"\t"+c.Namespace+"/"+c.Name+"\t"+strings.Join(cards, ", ")+"\t"+strings.Join(pods, ", "))
	}
	if rows == nil {
		return nil
	}
	return table(rows)
}

// nodeHeader is the NAME and IPADDRESS lines, then ISOLATION when the node carries the
// gpushare.io/isolation label, ENV DEVICE REQUESTS when it carries
// gpushare.io/env-device-requests, and USAGE with the sample time (and each card's unattributed
// memory when there is any) when share-plugin publishes usage.
func nodeHeader(n nodeUsage) []string {
	lines := []string{"NAME:\t" + n.Name, "IPADDRESS:\t" + n.IPAddress}
	if n.IsolationLabelled {
		lines = append(lines, "ISOLATION:\t"+n.Isolation)
	}
	if n.EnvDeviceRequests != "" {
		lines = append(lines, "ENV DEVICE REQUESTS:\t"+n.EnvDeviceRequests+envDeviceRequestsNote(n.EnvDeviceRequests))
	}
	if n.UsageTime != nil {
		usage := "sampled " + n.UsageTime.UTC().Format(time.RFC3339)
		var un []string
		for _, c := range n.Cards {
			if c.UnattributedMiB != nil && *c.UnattributedMiB > 0 {
				un = append(un, fmt.Sprintf("GPU%d %s", c.Index, mibString(*c.UnattributedMiB)))
			}
		}
		if len(un) > 0 {
			usage += "; used by no GPU-sharing pod: " + strings.Join(un, ", ")
		}
		lines = append(lines, "USAGE:\t"+usage)
	}
	return lines
}

// envDeviceRequestsNote says what a value of gpushare.io/env-device-requests means for a
// tenant ("" for "invalid", whose warning says more).
func envDeviceRequestsNote(v string) string {
	switch gpushare.EnvDeviceRequests(v) {
	case gpushare.EnvDeviceRequestsAccepted:
		return " (the NVIDIA runtime honours a pod's own NVIDIA_VISIBLE_DEVICES: a pod can reach every GPU of the node)"
	case gpushare.EnvDeviceRequestsRefused:
		return " (the NVIDIA runtime ignores a pod's own NVIDIA_VISIBLE_DEVICES)"
	case gpushare.EnvDeviceRequestsUnknown:
		return " (share-plugin found no NVIDIA runtime configuration it could read)"
	}
	return ""
}

// limitNote is " (limit 10)" for a pod that declares a memory limit on card index, in
// units; "" otherwise.
func limitNote(p podUsage, index int) string {
	if l := p.limit(index); l > 0 {
		return fmt.Sprintf(" (limit %d)", l)
	}
	return ""
}

// limitsLine is the "Limits :" line of a node one of whose pods declares a memory limit:
// per such card what its pods may allocate together beside its size
// ("GPU0 22/16, GPU1 8/16"); "" without any, so that such nodes print as before.
func limitsLine(n nodeUsage, suffix string) string {
	var cards []string
	for _, c := range n.Cards {
		if c.Limits > 0 {
			cards = append(cards, fmt.Sprintf("GPU%d %s/%s", c.Index, amount(c.Limits, suffix), amount(c.Total, suffix)))
		}
	}
	if cards == nil {
		return ""
	}
	return "Limits :\t" + strings.Join(cards, ", ")
}

// usedNote is " (used 5.2GiB)" for a pod whose use on card index the node's usage
// annotation reports, "" otherwise; ">=" marks a lower bound (NVML could not measure some
// processes).
func usedNote(p podUsage, index int) string {
	c, ok := p.card(index)
	if !ok || c.UsedMiB == nil {
		return ""
	}
	atLeast := ""
	if c.UsedUnknown {
		atLeast = ">="
	}
	return " (used " + atLeast + mibString(*c.UsedMiB) + ")"
}

// mibString writes MiB as MiB below 1 GiB, else as GiB with one decimal ("5.2GiB", "4GiB").
func mibString(mib int64) string {
	if mib < 1024 {
		return strconv.FormatInt(mib, 10) + "MiB"
	}
	return strings.TrimSuffix(strconv.FormatFloat(float64(mib)/1024, 'f', 1, 64), ".0") + "GiB"
}
