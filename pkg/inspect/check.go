package inspect

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// checkViews is what --check compares: the API server's annotations always; the extender's
// ledger and share-plugin's served cards when they could be read.
type checkViews struct {
	Annotations annotatedView
	// Extender is nil when the extender was not reached (NotChecked says why).
	Extender *gpushare.InspectReport
	// Plugins are the share-plugin answers that were read, one per node reached.
	Plugins []gpushare.ServedReport
	// DRA holds the nodes served by the DRA back end, by name: their ResourceSlices' cards
	// and the claims allocated on them.
	DRA map[string]draNode
	// DRAPrepared are the DRA plugins' prepared claims that were read, one per node reached.
	DRAPrepared []gpushare.DRAPreparedReport
	// RunningPods holds the running pods bound to the nodes read, as "namespace/name": a
	// claim of a running pod must be prepared.
	RunningPods map[string]bool
	// NotChecked lists the components (or nodes of them) that could not be read.
	NotChecked []notChecked
	// Node restricts the extender's and share-plugin's nodes to one ("" for all); the
	// annotations are already restricted when it is set.
	Node string
}

// notChecked is a component that was not compared. Required marks one the user named
// (--extender-url, --share-plugin-urls): not reaching it fails the check.
type notChecked struct {
	Component string `json:"component"`
	Reason    string `json:"reason"`
	Required  bool   `json:"required"`
}

func (n notChecked) String() string {
	return fmt.Sprintf("%s: not checked (%s)", n.Component, n.Reason)
}

// Kinds of problem, the "kind" of -o json.
const (
	problemInvalidRecord        = "invalid-record"        // a bound gpu-mem pod's allocation is missing or invalid
	problemCardOvercommitted    = "card-overcommitted"    // annotations give a card more units than it has
	problemExtenderDiffers      = "extender-differs"      // the extender's ledger disagrees with the annotations
	problemExtenderConservative = "extender-conservative" // the extender counts a pod on every card
	problemPluginDiffers        = "share-plugin-differs"  // share-plugin served other cards than annotated
	problemPluginOvercommitted  = "share-plugin-overcommitted"
	problemPluginInvalid        = "share-plugin-invalid"         // share-plugin's answer names no valid container
	problemClaimUnknownDevice   = "claim-unknown-device"         // a claim holds a device the node's ResourceSlices do not list
	problemClaimOvercommitted   = "claim-overcommitted"          // claims consume more of a card than its ResourceSlice capacity
	problemClaimNotPrepared     = "claim-not-prepared"           // a running pod's claim allocated on the node is not prepared by its DRA plugin
	problemClaimNotAllocated    = "claim-prepared-not-allocated" // the DRA plugin holds a claim prepared that is not allocated on its node
	problemClaimPreparedDiffers = "claim-prepared-differs"       // the DRA plugin prepared other units than the claim's allocation
)

// checkProblem is one disagreement. Line is the text form: node, card and what each view
// says.
type checkProblem struct {
	Kind string `json:"kind"`
	Node string `json:"node"`
	Card *int   `json:"card,omitempty"`
	Pod  string `json:"pod,omitempty"` // namespace/name
	Line string `json:"line"`
}

// checkReport is the outcome of --check and its -o json/yaml shape. Counts are of the
// annotations' view.
type checkReport struct {
	OK         bool           `json:"ok"` // no problem and every required component read
	Nodes      int            `json:"nodes"`
	Cards      int            `json:"cards"`
	Pods       int            `json:"pods"`
	Problems   []checkProblem `json:"problems"`
	Notes      []string       `json:"notes"` // reservations: not disagreements
	NotChecked []notChecked   `json:"notChecked"`
}

// failedRequired reports a required component that was not read.
func (r checkReport) failedRequired() bool {
	for _, n := range r.NotChecked {
		if n.Required {
			return true
		}
	}
	return false
}

// compareViews lists every disagreement between the views, in a stable order: per node by
// name, the annotations' own problems, then the extender's, then share-plugin's.
func compareViews(v checkViews) checkReport {
	r := checkReport{Problems: []checkProblem{}, Notes: []string{}, NotChecked: append([]notChecked{}, v.NotChecked...)}
	ann := map[string]*annotatedNode{}
	for i := range v.Annotations.Nodes {
		n := &v.Annotations.Nodes[i]
		ann[n.Name] = n
		r.Nodes++
		r.Cards += len(n.Cards)
		r.Pods += len(n.Pods)
	}
	ext := map[string]*gpushare.InspectNode{}
	if v.Extender != nil {
		for i := range v.Extender.Nodes {
			n := &v.Extender.Nodes[i]
			if v.Node == "" || n.Name == v.Node {
				ext[n.Name] = n
			}
		}
	}
	plugins := map[string][]gpushare.ServedReport{}
	for _, p := range v.Plugins {
		if v.Node == "" || p.Node == v.Node {
			plugins[p.Node] = append(plugins[p.Node], p)
		}
	}
	names := map[string]bool{}
	for n := range ann {
		names[n] = true
	}
	for n := range ext {
		names[n] = true
	}
	for n := range plugins {
		names[n] = true
	}
	for _, name := range sortedKeys(names) {
		a := ann[name]
		if a == nil {
			// Nodes the annotations do not share: no cards, no pods.
			a = &annotatedNode{Name: name, Cards: gpushare.CardUnits{}}
		}
		r.annotationProblems(a)
		if v.Extender != nil {
			r.extenderProblems(a, ext[name])
		}
		for _, p := range plugins[name] {
			r.pluginProblems(a, p)
		}
	}
	prepared := map[string][]gpushare.DRAPreparedReport{}
	for _, p := range v.DRAPrepared {
		prepared[p.Node] = append(prepared[p.Node], p)
	}
	for _, name := range sortedKeys(v.DRA) {
		r.claimProblems(name, v.DRA[name])
		for _, p := range prepared[name] {
			r.preparedProblems(name, v.DRA[name], p, v.RunningPods)
		}
	}
	r.OK = len(r.Problems) == 0 && !r.failedRequired()
	return r
}

// claimProblems: a DRA node's claims on devices its ResourceSlices do not list, and cards
// whose claims consume more than the slice's capacity.
func (r *checkReport) claimProblems(node string, n draNode) {
	used := map[int]int64{}
	byCard := map[int][]string{}
	for _, c := range n.Claims {
		for _, d := range c.Unknown {
			r.add(problemClaimUnknownDevice, node, nil, "", "node %s: claim %s holds device %s, which the node's ResourceSlices do not list", node, c.key(), d)
		}
		for idx, u := range c.Cards {
			used[idx] += u
			byCard[idx] = append(byCard[idx], fmt.Sprintf("%s %d", c.key(), u))
		}
	}
	for _, card := range n.Cards {
		if used[card.Index] > card.Total {
			r.add(problemClaimOvercommitted, node, ptr(card.Index), "", "node %s card %d: claims consume %d units, ResourceSlice capacity %d (%s)",
				node, card.Index, used[card.Index], card.Total, strings.Join(byCard[card.Index], ", "))
		}
	}
}

// preparedProblems compares the claims a node's DRA plugin prepared with those allocated
// on the node's cards, by UID: an allocated claim a running pod reserves that is not
// prepared, a prepared claim no longer allocated there, and units per card that differ.
func (r *checkReport) preparedProblems(node string, n draNode, p gpushare.DRAPreparedReport, running map[string]bool) {
	held := map[string]gpushare.DRAPreparedClaim{}
	for _, c := range p.Claims {
		held[string(c.UID)] = c
	}
	allocated := map[string]bool{}
	for _, c := range n.Claims {
		allocated[c.UID] = true
		pc, ok := held[c.UID]
		switch {
		case !ok:
			if pod := runningPod(c, running); pod != "" {
				r.add(problemClaimNotPrepared, node, nil, c.Namespace+"/"+pod, "node %s: claim %s is allocated here and its pod %s runs, but the DRA plugin has not prepared it",
					node, c.key(), pod)
			}
		case !equalCardUnits(c.Cards, pc.Cards):
			r.add(problemClaimPreparedDiffers, node, nil, "", "node %s: claim %s: the DRA plugin prepared %s, the claim's allocation %s",
				node, c.key(), formatCards(pc.Cards), formatCards(c.Cards))
		}
	}
	for _, c := range p.Claims {
		if !allocated[string(c.UID)] {
			r.add(problemClaimNotAllocated, node, nil, "", "node %s: the DRA plugin holds claim %s/%s (uid %s) prepared with %s, but no claim of that UID is allocated on the node",
				node, c.Namespace, c.Name, c.UID, formatCards(c.Cards))
		}
	}
}

// runningPod is the first pod that reserves claim c and runs, "" when none does.
func runningPod(c draClaim, running map[string]bool) string {
	for _, pod := range c.Pods {
		if running[c.Namespace+"/"+pod] {
			return pod
		}
	}
	return ""
}

func (r *checkReport) add(kind, node string, card *int, pod, format string, args ...any) {
	r.Problems = append(r.Problems, checkProblem{Kind: kind, Node: node, Card: card, Pod: pod, Line: fmt.Sprintf(format, args...)})
}

// annotationProblems: invalid records, and cards given more units than they have.
func (r *checkReport) annotationProblems(n *annotatedNode) {
	for _, p := range n.Pods {
		if p.Invalid != "" {
			r.add(problemInvalidRecord, n.Name, nil, p.key(), "node %s: pod %s: %s", n.Name, p.key(), p.Invalid)
		}
	}
	used := n.used()
	for _, c := range slices.Sorted(maps.Keys(used.total)) {
		size, listed := n.Cards[c]
		if used.total[c] > size && listed {
			r.add(problemCardOvercommitted, n.Name, ptr(c), "", "node %s card %d: annotations give %d units, card size %d (%s)",
				n.Name, c, used.total[c], size, formatPods(used.byPod[c]))
		}
	}
}

// cardSums is the units per card of the valid pods, in total and per pod key.
type cardSums struct {
	total gpushare.CardUnits
	byPod map[int]map[string]int64
}

func (n *annotatedNode) used() cardSums {
	s := cardSums{total: gpushare.CardUnits{}, byPod: map[int]map[string]int64{}}
	for _, p := range n.Pods {
		for c, u := range p.Usage {
			if u == 0 {
				continue
			}
			s.total[c] += u
			if s.byPod[c] == nil {
				s.byPod[c] = map[string]int64{}
			}
			s.byPod[c][p.key()] += u
		}
	}
	return s
}

// extenderProblems compares the extender's ledger of one node with the annotations. Per
// card, the extender's Used less its reserved and conservative pods must equal the valid
// annotated pods' units; reserved pods are left out on both sides (a hold whose pod the
// extender has not seen bound yet is no disagreement) and noted.
func (r *checkReport) extenderProblems(a *annotatedNode, e *gpushare.InspectNode) {
	if e == nil {
		e = &gpushare.InspectNode{Name: a.Name}
	}
	pods := map[string]annotatedPod{}
	for _, p := range a.Pods {
		pods[p.key()] = p
	}
	reserved := map[string]bool{}
	conservative := map[string]*conservativePod{}
	extCards := map[int]*gpushare.InspectCard{}
	for i := range e.Cards {
		c := &e.Cards[i]
		extCards[c.Index] = c
		for _, p := range c.Pods {
			key := extenderPodKey(p, pods)
			switch {
			case p.Reserved:
				reserved[key] = true
				r.Notes = append(r.Notes, fmt.Sprintf("node %s card %d: extender holds %d units for %s, reserved and not yet seen bound", a.Name, c.Index, p.Units, key))
			case p.Conservative:
				if conservative[key] == nil {
					conservative[key] = &conservativePod{}
				}
				conservative[key].add(c.Index, p)
			}
		}
	}
	for _, key := range sortedKeys(conservative) {
		r.add(problemExtenderConservative, a.Name, nil, key, "node %s: pod %s: %s", a.Name, key, conservative[key])
	}
	used := a.used()
	cards := map[int]bool{}
	for c := range used.total {
		cards[c] = true
	}
	for c := range extCards {
		cards[c] = true
	}
	for _, c := range sortedKeys(cards) {
		annPods := map[string]int64{}
		var annTotal int64
		for key, u := range used.byPod[c] {
			if !reserved[key] {
				annPods[key] = u
				annTotal += u
			}
		}
		extPods := map[string]int64{}
		var extTotal int64
		if ec := extCards[c]; ec != nil {
			extTotal = ec.Used
			for _, p := range ec.Pods {
				key := extenderPodKey(p, pods)
				if p.Reserved || p.Conservative {
					extTotal -= p.Units
					continue
				}
				extPods[key] += p.Units
			}
		}
		if extTotal == annTotal && equalUnits(annPods, extPods) {
			continue
		}
		r.add(problemExtenderDiffers, a.Name, ptr(c), "", "node %s card %d: extender counts %d units, annotations %d (%s)",
			a.Name, c, extTotal, annTotal, podDiffs(annPods, extPods, pods))
	}
}

// conservativePod is what the extender counts, card by card, for a pod it cannot trust.
type conservativePod struct {
	cards   []int
	units   []int64 // by cards
	charged bool
	since   time.Time // zero: not reported
}

func (c *conservativePod) add(card int, p gpushare.InspectPod) {
	c.cards, c.units = append(c.cards, card), append(c.units, p.Units)
	c.charged = c.charged || p.Charged
	if p.UnrecordedSince != nil {
		c.since = p.UnrecordedSince.Time
	}
}

// String says what the pod blocks: within its grace period every card; past it, the units
// charged on the cards it is counted on, and since when it has shown no record.
func (c *conservativePod) String() string {
	if !c.charged {
		return fmt.Sprintf("extender counts it on every card (%s) because its record is invalid", joinInts(c.cards))
	}
	var total int64
	parts := make([]string, len(c.cards))
	for i, card := range c.cards {
		total += c.units[i]
		parts[i] = fmt.Sprintf("%d (%d units)", card, c.units[i])
	}
	cards := "card"
	if len(parts) > 1 {
		cards = "cards"
	}
	since := "for longer than the grace period"
	if !c.since.IsZero() {
		since = "since " + c.since.UTC().Format(time.RFC3339) + ", past the grace period"
	}
	return fmt.Sprintf("blocks %d units of the node on %s %s: no valid allocation record %s, so the extender charges it "+
		"to the node's free units until share-plugin records its card or it ends", total, cards, strings.Join(parts, ", "), since)
}

// extenderPodKey is the annotations' key of an extender pod; a pod whose UID differs from
// the bound pod of that name is another pod (a deleted one the ledger still holds), so its
// key carries the UID.
func extenderPodKey(p gpushare.InspectPod, pods map[string]annotatedPod) string {
	key := p.Namespace + "/" + p.Name
	if ap, ok := pods[key]; ok && p.UID != "" && ap.UID != "" && string(p.UID) != ap.UID {
		return key + " (uid " + string(p.UID) + ")"
	}
	return key
}

// podDiffs lists the pods whose units differ between the annotations and the extender.
func podDiffs(ann, ext map[string]int64, pods map[string]annotatedPod) string {
	keys := map[string]bool{}
	for k := range ann {
		keys[k] = true
	}
	for k := range ext {
		keys[k] = true
	}
	var parts []string
	for _, k := range sortedKeys(keys) {
		if ann[k] == ext[k] {
			continue
		}
		annSays := fmt.Sprint(ann[k])
		if p, ok := pods[k]; ok && p.Invalid != "" {
			annSays = "invalid"
		} else if !ok {
			annSays = "not bound here"
		}
		parts = append(parts, fmt.Sprintf("%s: extender %d, annotations %s", k, ext[k], annSays))
	}
	if len(parts) == 0 {
		return "its pods agree; its used total does not"
	}
	return strings.Join(parts, "; ")
}

// pluginProblems compares what share-plugin served on one node with the annotations: each
// served container's cards, and each card's served units against its size.
func (r *checkReport) pluginProblems(a *annotatedNode, s gpushare.ServedReport) {
	pods := map[string]annotatedPod{}
	for _, p := range a.Pods {
		pods[p.key()] = p
	}
	containers := append([]gpushare.ServedContainer{}, s.Containers...)
	sort.SliceStable(containers, func(i, j int) bool {
		ki, kj := containers[i].Namespace+"/"+containers[i].Name, containers[j].Namespace+"/"+containers[j].Name
		if ki != kj {
			return ki < kj
		}
		return containers[i].Container < containers[j].Container
	})
	for _, c := range containers {
		key := c.Namespace + "/" + c.Name
		ref, err := parseContainerRef(c.Container)
		if err != nil {
			r.add(problemPluginInvalid, a.Name, nil, key, "node %s: pod %s: share-plugin served container %q, which is not app/N or init/N", a.Name, key, c.Container)
			continue
		}
		p, bound := pods[key]
		if bound && c.UID != "" && p.UID != "" && string(c.UID) != p.UID {
			bound = false
		}
		var annSays string
		switch {
		case !bound:
			annSays = "pod not bound here"
		case p.Invalid != "" && len(p.Alloc.For(ref)) == 0:
			annSays = "invalid record"
		default:
			want := p.Alloc.For(ref)
			if equalCardUnits(want, c.Cards) {
				continue
			}
			annSays = formatCards(want)
		}
		r.add(problemPluginDiffers, a.Name, nil, key, "node %s: pod %s %s: share-plugin served %s, annotations %s",
			a.Name, key, ref, formatCards(c.Cards), annSays)
	}
	cards := append([]gpushare.ServedCard{}, s.Cards...)
	sort.SliceStable(cards, func(i, j int) bool { return cards[i].Index < cards[j].Index })
	for _, c := range cards {
		if c.ServedUnits > c.TotalUnits {
			r.add(problemPluginOvercommitted, a.Name, ptr(c.Index), "", "node %s card %d: share-plugin served %d units, card size %d",
				a.Name, c.Index, c.ServedUnits, c.TotalUnits)
		}
	}
}

// parseContainerRef reads one "app/N" or "init/N" (gpushare.ContainerRef.String).
func parseContainerRef(s string) (gpushare.ContainerRef, error) {
	refs, err := gpushare.ParseAllocated(s)
	if err != nil {
		return gpushare.ContainerRef{}, err
	}
	if len(refs) != 1 {
		return gpushare.ContainerRef{}, fmt.Errorf("%q names %d containers, want one", s, len(refs))
	}
	var out gpushare.ContainerRef
	for ref := range refs {
		out = ref
	}
	return out, nil
}

func equalUnits(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// equalCardUnits compares two card maps, a card with 0 units counting as absent.
func equalCardUnits(a, b gpushare.CardUnits) bool {
	for c, u := range a {
		if b[c] != u {
			return false
		}
	}
	for c, u := range b {
		if a[c] != u {
			return false
		}
	}
	return true
}

// formatPods writes per-pod units as "ns/a 10, ns/b 8".
func formatPods(m map[string]int64) string {
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ",")
}

func sortedKeys[K int | string, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func ptr[T any](v T) *T { return &v }
