package inspect

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// isSharingNode reports whether the node shares GPUs: it carries the cgpu=true label or the
// DRA back end's label, share-plugin's inventory annotation, or a positive allocatable
// res.Mem.
func isSharingNode(node *corev1.Node, res gpushare.Resources) bool {
	if node.Labels[gpushare.NodeLabelKey] == gpushare.NodeLabelValue || isDRANode(node.Labels) {
		return true
	}
	if _, ok := node.Annotations[gpushare.AnnotationNodeInventory]; ok {
		return true
	}
	q, ok := node.Status.Allocatable[res.Mem]
	return ok && q.Value() > 0
}

// buildModel computes the occupancy of the GPU-sharing nodes among nodes (others are skipped)
// from the pods bound to them. Terminated pods (Succeeded, Failed) and pods of other nodes
// are ignored, and duplicates counted once, so callers may pass a wider list than needed. Per-card inventory comes from
// res.NodeInventory (annotation first, else allocatable gpu-mem/gpu-count); allocations from
// res.ReadAllocation (per-container JSON first, else the single-card index annotation).
// A node served by the DRA back end takes its cards from dra's ResourceSlices and adds the
// claims allocated on them.
// A bound pod that requests res.Mem but has no card annotation counts as pending on its
// node. Problems with annotations become Node.Warnings, never errors. Nodes are sorted by
// name, pods by namespace and name.
func buildModel(nodes []corev1.Node, pods []corev1.Pod, dra draObjects, res gpushare.Resources) model {
	byNode := boundPodsByNode(pods)
	var m model
	for i := range nodes {
		n := &nodes[i]
		if !isSharingNode(n, res) {
			continue
		}
		m.Nodes = append(m.Nodes, buildNode(n, byNode[n.Name], dra, res))
	}
	sort.Slice(m.Nodes, func(i, j int) bool { return m.Nodes[i].Name < m.Nodes[j].Name })
	m.Totals = totals(m.Nodes)
	return m
}

// boundPodsByNode groups the non-terminated pods bound to a node by node name, in list
// order. A pod listed twice (overlapping lists) is kept once, so it never counts twice.
func boundPodsByNode(pods []corev1.Pod) map[string][]*corev1.Pod {
	byNode := map[string][]*corev1.Pod{}
	seen := map[types.NamespacedName]bool{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		if seen[key] {
			continue
		}
		seen[key] = true
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
	}
	return byNode
}

func buildNode(node *corev1.Node, pods []*corev1.Pod, dra draObjects, res gpushare.Resources) nodeUsage {
	inv, src, err := res.NodeInventory(node)
	var claims []draClaim
	var draWarnings []string
	if isDRANode(node.Labels) {
		d := readDRANode(node.Name, dra)
		inv, src, err, claims, draWarnings = d.inventory(), inventoryResourceSlice, nil, d.Claims, d.Warnings
	}
	n := nodeUsage{
		Name:            node.Name,
		IPAddress:       nodeAddress(node),
		Unit:            inv.Unit,
		InventorySource: src,
		Cards:           []cardUsage{},
		Pods:            []podUsage{},
	}
	n.Warnings = append(n.Warnings, draWarnings...)
	switch {
	case err != nil:
		n.Warnings = append(n.Warnings, fmt.Sprintf("node %s: %v", node.Name, err))
	case len(inv.Devices) == 0:
		n.Warnings = append(n.Warnings, fmt.Sprintf("node %s: shares GPUs but publishes no cards (is share-plugin running on it?)", node.Name))
	}
	for _, d := range inv.Devices {
		n.Cards = append(n.Cards, cardUsage{Index: d.Index, UUID: d.UUID, Model: d.Model, Total: d.Units, Healthy: d.Healthy})
	}
	n.Isolation, n.IsolationLabelled = isolation(node, &n.Warnings)
	n.EnvDeviceRequests = envDeviceRequests(node, &n.Warnings)
	for _, p := range pods {
		pod, warn, ok := buildPod(p, res)
		if warn != "" {
			n.Warnings = append(n.Warnings, warn)
		}
		if !ok {
			continue
		}
		n.Pods = append(n.Pods, pod)
		n.PendingAllocated += pod.PendingAllocated
		for _, pc := range pod.Cards {
			n.addToCard(pc)
		}
	}
	if isDRANode(node.Labels) {
		n.Backend = string(gpushare.BackendDRA)
		n.addClaims(claims)
	}
	sort.Slice(n.Cards, func(i, j int) bool { return n.Cards[i].Index < n.Cards[j].Index })
	n.addLimits()
	n.addCompute()
	if v, ok := node.Annotations[gpushare.AnnotationNodeUsage]; ok {
		n.addUsage(v)
	}
	sort.Slice(n.Pods, func(i, j int) bool {
		if n.Pods[i].Namespace != n.Pods[j].Namespace {
			return n.Pods[i].Namespace < n.Pods[j].Namespace
		}
		return n.Pods[i].Name < n.Pods[j].Name
	})
	// The extender's rule (gpushare.InspectNode): an unhealthy card's pods still hold their units,
	// but its capacity is not on offer, so Allocated counts every card and Total the healthy
	// ones.
	for _, c := range n.Cards {
		if c.Healthy {
			n.Total += c.Total
		}
		n.Allocated += c.Allocated
	}
	n.Allocated += n.PendingAllocated
	n.Percent = percent(n.Allocated, n.Total)
	return n
}

// addToCard charges a pod's units to its card, adding a Missing card when the inventory
// does not list the index (so the units are still shown, not silently dropped).
func (n *nodeUsage) addToCard(pc podCard) {
	for i := range n.Cards {
		if n.Cards[i].Index == pc.Index {
			n.Cards[i].Allocated += pc.Allocated
			return
		}
	}
	n.Cards = append(n.Cards, cardUsage{Index: pc.Index, Allocated: pc.Allocated, Missing: true})
	n.Warnings = append(n.Warnings, fmt.Sprintf("node %s: pods use card %d, which the node's inventory does not list", n.Name, pc.Index))
}

// buildPod reads one pod's placement. ok is false for pods that neither request res.Mem nor
// carry a card annotation. warn describes an unreadable request or annotation.
func buildPod(p *corev1.Pod, res gpushare.Resources) (pod podUsage, warn string, ok bool) {
	pod = podUsage{Name: p.Name, Namespace: p.Namespace, Cards: []podCard{}, uid: p.UID, cardChoice: cardChoiceOf(p)}
	req, reqErr := res.PodRequest(p)
	alloc, placed, allocErr := res.ReadAllocation(p)
	switch {
	case allocErr != nil && reqErr == nil && !req.IsZero():
		// The request is readable: count it as pending so the node's total stays honest.
		warn = fmt.Sprintf("pod %s/%s: %v (counted as pending)", p.Namespace, p.Name, allocErr)
		pod.PendingAllocated = req.TotalUnits()
	case allocErr != nil:
		return podUsage{}, fmt.Sprintf("pod %s/%s: %v (ignored)", p.Namespace, p.Name, allocErr), false
	case placed:
		usage := alloc.CardUsage(p)
		limits, limitErr := podLimits(p, req, reqErr, alloc)
		if limitErr != nil {
			warn = fmt.Sprintf("pod %s/%s: %v (limits not shown)", p.Namespace, p.Name, limitErr)
		}
		compute, computeErr := podCompute(p, req, reqErr, alloc)
		if computeErr != nil {
			warn = joinWarn(warn, fmt.Sprintf("pod %s/%s: %v (compute shares not shown)", p.Namespace, p.Name, computeErr))
		}
		for _, idx := range alloc.Cards() {
			if u := usage[idx]; u > 0 {
				pc := podCard{Index: idx, Allocated: u, Compute: compute[idx]}
				if l := limits[idx]; l > u {
					pc.Limit = l
				}
				pod.Cards = append(pod.Cards, pc)
			}
		}
	case reqErr != nil:
		return podUsage{}, fmt.Sprintf("pod %s/%s: %v (ignored)", p.Namespace, p.Name, reqErr), false
	case req.IsZero():
		return podUsage{}, "", false
	default:
		pod.PendingAllocated = req.TotalUnits()
	}
	for _, c := range pod.Cards {
		pod.Allocated += c.Allocated
	}
	pod.Allocated += pod.PendingAllocated
	if pod.Allocated == 0 && !placed {
		return podUsage{}, warn, false
	}
	return pod, warn, true
}

// podLimits is what the pod's containers may allocate on each card of alloc at most where
// they declare memory limits (gpushare.WithMemLimits; the limits' usage by the
// effective-request rule, as share-plugin hands the pod's cgroup); nil for a pod without
// any, or whose request (reqErr) does not read. Errors: the limit annotation does not read.
func podLimits(p *corev1.Pod, req gpushare.PodRequest, reqErr error, alloc gpushare.PodAllocation) (gpushare.CardUnits, error) {
	if reqErr != nil {
		return nil, nil
	}
	req, err := gpushare.WithMemLimits(p, req)
	if err != nil || !req.Limited() {
		return nil, err
	}
	return req.LimitAllocation(alloc).CardUsage(p), nil
}

// addLimits sets each card's Limits, where a pod of the card declares a limit there: the
// sum over its pods of what each may allocate (podCard.committed).
func (n *nodeUsage) addLimits() {
	for i := range n.Cards {
		var sum int64
		limited := false
		for _, p := range n.Pods {
			if c, ok := p.card(n.Cards[i].Index); ok {
				sum += c.committed()
				limited = limited || c.Limit > 0
			}
		}
		if limited {
			n.Cards[i].Limits = sum
		}
	}
}

// joinWarn is a and b as one warning, "; " between; either alone when the other is "".
func joinWarn(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// cardChoiceOf words the pod's card annotations for the details view: "key=value, …", or
// "invalid: <why>"; "" for a pod without any.
func cardChoiceOf(p *corev1.Pod) string {
	c, err := gpushare.ParseCardChoice(p.Annotations)
	if err != nil {
		return "invalid: " + err.Error()
	}
	return strings.Join(c.Annotations(), ", ")
}

// isolation reads the node's gpushare.io/isolation label (gpushare.ParseIsolation): its
// mode, "invalid" (with a warning) for a value it does not know, and whether the label is
// set at all. A mode share-plugin says it cannot enforce (gpushare.LabelIsolationEnforced
// differs) is a warning too.
func isolation(node *corev1.Node, warnings *[]string) (string, bool) {
	v, labelled := node.Labels[gpushare.LabelIsolation]
	mode, err := gpushare.ParseIsolation(v)
	if err != nil {
		*warnings = append(*warnings, fmt.Sprintf("node %s: %v", node.Name, err))
		return "invalid", labelled
	}
	if e, ok := node.Labels[gpushare.LabelIsolationEnforced]; ok && e != string(mode) {
		*warnings = append(*warnings, fmt.Sprintf("node %s: isolation %s is not enforced (share-plugin: %s=%s); its GPU containers are refused, see the node's events",
			node.Name, mode, gpushare.LabelIsolationEnforced, e))
	}
	return string(mode), labelled
}

// envDeviceRequests reads the node's gpushare.io/env-device-requests label
// (gpushare.ParseEnvDeviceRequests): its value, "invalid" (with a warning) for a value it
// does not know, "" without the label.
func envDeviceRequests(node *corev1.Node, warnings *[]string) string {
	v, labelled := node.Labels[gpushare.LabelEnvDeviceRequests]
	if !labelled {
		return ""
	}
	e, err := gpushare.ParseEnvDeviceRequests(v)
	if err != nil {
		*warnings = append(*warnings, fmt.Sprintf("node %s: %v", node.Name, err))
		return "invalid"
	}
	return string(e)
}

// addUsage adds share-plugin's usage annotation (value v) to the node's cards and pods: per
// card the unattributed MiB, per pod and card the sum of its containers' MiB. A value that
// does not parse is a warning and adds nothing; cards the inventory does not list and pods
// not on the node (matched by UID) are skipped.
func (n *nodeUsage) addUsage(v string) {
	u, err := gpushare.ParseUsage(v)
	if err != nil {
		n.Warnings = append(n.Warnings, fmt.Sprintf("node %s: %v (usage not shown)", n.Name, err))
		return
	}
	t := u.Time
	n.UsageTime = &t
	pods := map[types.UID]*podUsage{}
	for i := range n.Pods {
		pods[n.Pods[i].uid] = &n.Pods[i]
	}
	for _, cu := range u.Cards {
		ci := -1
		for i, c := range n.Cards {
			if c.UUID != "" && c.UUID == cu.UUID {
				ci = i
			}
		}
		if ci < 0 {
			continue
		}
		idx := n.Cards[ci].Index
		un := cu.UnattributedMiB
		n.Cards[ci].UnattributedMiB = &un
		for _, pu := range cu.Pods {
			pod := pods[pu.UID]
			if pod == nil || pod.Namespace != pu.Namespace || pod.Name != pu.Name {
				continue
			}
			var used int64
			unknown := false
			for _, c := range pu.Containers {
				used += c.UsedMiB
				unknown = unknown || c.Unknown
			}
			pod.setUsed(idx, used, unknown)
		}
	}
}

// setUsed records the pod's use on card index, adding the card (0 units) when the pod
// holds nothing there.
func (p *podUsage) setUsed(index int, mib int64, unknown bool) {
	for i := range p.Cards {
		if p.Cards[i].Index == index {
			p.Cards[i].UsedMiB, p.Cards[i].UsedUnknown = &mib, unknown
			return
		}
	}
	p.Cards = append(p.Cards, podCard{Index: index, UsedMiB: &mib, UsedUnknown: unknown})
	sort.Slice(p.Cards, func(i, j int) bool { return p.Cards[i].Index < p.Cards[j].Index })
}

// nodeAddress is the node's InternalIP, else its first address, else "unknown" (the old
// tool's placeholder).
func nodeAddress(node *corev1.Node) string {
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	if len(node.Status.Addresses) > 0 {
		return node.Status.Addresses[0].Address
	}
	return "unknown"
}

// totals sums the nodes in the largest unit dividing every node's unit, so mixed GiB and
// MiB nodes add up in MiB rather than adding GiB to MiB.
func totals(nodes []nodeUsage) sums {
	t := sums{Unit: commonUnit(nodes)}
	var allocMiB, totalMiB int64
	for _, n := range nodes {
		allocMiB += n.Allocated * unitMiB(n.Unit)
		totalMiB += n.Total * unitMiB(n.Unit)
	}
	t.Allocated = allocMiB / unitMiB(t.Unit)
	t.Total = totalMiB / unitMiB(t.Unit)
	t.Percent = percent(t.Allocated, t.Total)
	return t
}

// commonUnit is the nodes' unit when they agree (GiB without nodes), else the largest unit
// that divides all of them.
func commonUnit(nodes []nodeUsage) gpushare.Unit {
	if len(nodes) == 0 {
		return gpushare.GiB
	}
	g := unitMiB(nodes[0].Unit)
	for _, n := range nodes[1:] {
		g = gcd(g, unitMiB(n.Unit))
	}
	return gpushare.Unit{MiB: g}
}

// mixedUnits reports nodes that do not all use the same unit.
func mixedUnits(nodes []nodeUsage) bool {
	for _, n := range nodes[min(1, len(nodes)):] {
		if unitMiB(n.Unit) != unitMiB(nodes[0].Unit) {
			return true
		}
	}
	return false
}

// unitMiB is the unit's size in MiB, treating the zero Unit as GiB like Unit.String does.
func unitMiB(u gpushare.Unit) int64 {
	if u.MiB <= 0 {
		return gpushare.GiB.MiB
	}
	return u.MiB
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
