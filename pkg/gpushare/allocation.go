package gpushare

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// CardUnits maps a card index to gpu-mem units.
type CardUnits map[int]int64

// Allocation maps a container index to the units it holds on each card: the decoded form of
// {"<containerIndex>":{"<cardIndex>":units}}.
type Allocation map[int]CardUnits

// PodAllocation is the cards chosen for each container of a pod.
type PodAllocation struct {
	App  Allocation // index into spec.containers (AnnotationAllocation)
	Init Allocation // index into spec.initContainers (AnnotationInitAllocation)
}

// For returns the cards of one container (nil when it holds none).
func (a PodAllocation) For(ref ContainerRef) CardUnits {
	if ref.InitList {
		return a.Init[ref.Index]
	}
	return a.App[ref.Index]
}

// Set records the cards of one container.
func (a *PodAllocation) Set(ref ContainerRef, cards CardUnits) {
	m := &a.App
	if ref.InitList {
		m = &a.Init
	}
	if *m == nil {
		*m = Allocation{}
	}
	(*m)[ref.Index] = cards
}

// Cards lists the distinct card indexes the pod uses, ascending.
func (a PodAllocation) Cards() []int {
	seen := map[int]bool{}
	for _, al := range []Allocation{a.App, a.Init} {
		for _, cu := range al {
			for c := range cu {
				seen[c] = true
			}
		}
	}
	out := make([]int, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Ints(out)
	return out
}

// CardUsage is what the pod holds on each card, following the Kubernetes effective-request
// rule per card: app and sidecar containers run together; each regular init container runs
// alone beside the sidecars. usage[card] = max(sum(app+sidecar), max_i(init_i + sidecars)).
// pod supplies which init containers are sidecars.
func (a PodAllocation) CardUsage(pod *corev1.Pod) CardUnits {
	running := CardUnits{}
	for _, cu := range a.App {
		for c, u := range cu {
			running[c] += u
		}
	}
	sidecars := CardUnits{}
	for i, cu := range a.Init {
		if isSidecar(pod, i) {
			for c, u := range cu {
				running[c] += u
				sidecars[c] += u
			}
		}
	}
	usage := running
	for i, cu := range a.Init {
		if isSidecar(pod, i) {
			continue
		}
		for c, u := range cu {
			if v := u + sidecars[c]; v > usage[c] {
				usage[c] = v
			}
		}
	}
	return usage
}

func isSidecar(pod *corev1.Pod, i int) bool {
	if pod == nil || i < 0 || i >= len(pod.Spec.InitContainers) {
		return false
	}
	p := pod.Spec.InitContainers[i].RestartPolicy
	return p != nil && *p == corev1.ContainerRestartPolicyAlways
}

// MaxCardIndex bounds the card indexes an allocation may name (indexes are 0..MaxCardIndex-1):
// no node has that many cards, and a tenant-written index cannot make the ledger grow a
// card per absurd number.
const MaxCardIndex = 1024

// ValidateAllocation checks a pod's allocation against its request alone, wherever its
// cards are: ValidateAllocationOn without the check that each card exists on the node.
func (p PodRequest) ValidateAllocation(a PodAllocation) error {
	return p.ValidateAllocationOn(a, nil)
}

// ValidateAllocationOn checks a pod's allocation against its request on a node whose cards
// hasCard reports (nil: no node to check against). Valid means: every container that
// requests gpu-mem holds exactly its Cards distinct cards with exactly PerCard gpu-mem units
// (> 0) on each; card indexes are in 0..MaxCardIndex-1 and each is a card of the node
// (hasCard is asked only about indexes in that range); no entry names a card for a container
// that requests no gpu-mem or does not exist. An entry that names no card ({"1":{}}) names
// nothing: it is allowed for any container and is no allocation for a gpu-mem one. Together
// with the bound on a container's units this keeps every sum of validated values within
// int64.
//
// The error names the first container at fault (those of the request in its order, then the
// other entries, app before init, by index) with the card and the rule broken; checks run
// card by card in index order, so the error is the same on every call. nil means the
// allocation is exactly what the request asks for, on cards the node has.
func (p PodRequest) ValidateAllocationOn(a PodAllocation, hasCard func(index int) bool) error {
	want := make(map[ContainerRef]bool, len(p.Containers))
	for _, c := range p.Containers {
		want[c.Ref] = true
		if err := c.validateCards(a.For(c.Ref), hasCard); err != nil {
			return err
		}
	}
	for _, list := range []struct {
		init bool
		al   Allocation
	}{{false, a.App}, {true, a.Init}} {
		for _, i := range slices.Sorted(maps.Keys(list.al)) {
			if ref := (ContainerRef{InitList: list.init, Index: i}); len(list.al[i]) > 0 && !want[ref] {
				return fmt.Errorf("allocation names container %s, which does not exist or requests no gpu-mem", ref)
			}
		}
	}
	return nil
}

// validateCards checks the cards of one gpu-mem container (see ValidateAllocationOn).
func (c ContainerRequest) validateCards(cu CardUnits, hasCard func(int) bool) error {
	switch {
	case len(cu) == 0:
		return fmt.Errorf("container %q (%s): no cards in the allocation; it requests %d units", c.Name, c.Ref, c.Units)
	case len(cu) != c.Cards:
		return fmt.Errorf("container %q (%s): allocation lists %d cards, the request wants %d", c.Name, c.Ref, len(cu), c.Cards)
	}
	per := c.PerCard()
	for _, card := range slices.Sorted(maps.Keys(cu)) {
		switch u := cu[card]; {
		case card < 0 || card >= MaxCardIndex:
			return fmt.Errorf("container %q (%s): card index %d out of range 0..%d", c.Name, c.Ref, card, MaxCardIndex-1)
		case hasCard != nil && !hasCard(card):
			return fmt.Errorf("container %q (%s): allocation names card %d, which the node does not have", c.Name, c.Ref, card)
		case u != per:
			return fmt.Errorf("container %q (%s): allocation holds %d units on card %d, the request wants %d per card", c.Name, c.Ref, u, card, per)
		}
	}
	return nil
}

// marshalAllocation encodes an Allocation in the compatible JSON form.
func marshalAllocation(a Allocation) string {
	// encoding/json writes integer map keys as strings and sorts them: stable output.
	b, _ := json.Marshal(a) // a map of ints to maps of ints cannot fail to encode
	return string(b)
}

// parseAllocation decodes {"<containerIndex>":{"<cardIndex>":units}}; negative indexes or
// units are errors.
func parseAllocation(s string) (Allocation, error) {
	var a Allocation
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		return nil, fmt.Errorf("decoding allocation %q: %w", s, err)
	}
	for ci, cu := range a {
		if ci < 0 {
			return nil, fmt.Errorf("allocation %q: negative container index", s)
		}
		for card, u := range cu {
			if card < 0 || u < 0 {
				return nil, fmt.Errorf("allocation %q: negative card index or units", s)
			}
		}
	}
	return a, nil
}

// ReadAllocation returns the cards chosen for the pod, from the per-container annotations
// when present, else from the single-card annotations of older extenders (every gpu-mem
// container on card ALIYUN_COM_GPU_MEM_IDX; res tells which containers request gpu-mem).
// ok is false when the pod carries no card annotation (not yet placed).
func (r Resources) ReadAllocation(pod *corev1.Pod) (a PodAllocation, ok bool, err error) {
	ann := pod.Annotations
	if s, has := ann[AnnotationAllocation]; has {
		if a.App, err = parseAllocation(s); err != nil {
			return PodAllocation{}, false, err
		}
		ok = true
	}
	if s, has := ann[AnnotationInitAllocation]; has {
		if a.Init, err = parseAllocation(s); err != nil {
			return PodAllocation{}, false, err
		}
		ok = true
	}
	if ok {
		return a, true, nil
	}
	s, has := ann[AnnotationIndex]
	if !has {
		return PodAllocation{}, false, nil
	}
	idx, err := strconv.Atoi(s)
	if err != nil || idx < 0 {
		return PodAllocation{}, false, fmt.Errorf("annotation %s=%q is not a card index", AnnotationIndex, s)
	}
	req, err := r.PodRequest(pod)
	if err != nil {
		return PodAllocation{}, false, err
	}
	for _, c := range req.Containers {
		if c.Cards != 1 {
			return PodAllocation{}, false, fmt.Errorf("container %q wants %d cards but the pod only has the single-card annotation %s", c.Name, c.Cards, AnnotationIndex)
		}
		a.Set(c.Ref, CardUnits{idx: c.Units})
	}
	return a, true, nil
}

// BindAnnotations are the annotations the extender writes at bind: the per-container
// allocation (and init allocation when any init container holds cards), the pod total,
// ASSIGNED=false, the assume time, for a pod on exactly one card the single-card IDX and
// DEV (cardUnits gives each card's size) that older readers use, and the unit all these
// counts are in (AnnotationUnit; left out for the zero Unit, a node whose unit is unknown).
func BindAnnotations(a PodAllocation, podUnits int64, cardUnits CardUnits, unit Unit, now time.Time) map[string]string {
	out := map[string]string{
		AnnotationAllocation: marshalAllocation(nonNil(a.App)),
		AnnotationPodUnits:   strconv.FormatInt(podUnits, 10),
		AnnotationAssigned:   "false",
		AnnotationAssumeTime: strconv.FormatInt(now.UnixNano(), 10),
	}
	if len(a.Init) > 0 {
		out[AnnotationInitAllocation] = marshalAllocation(a.Init)
	}
	if cards := a.Cards(); len(cards) == 1 {
		out[AnnotationIndex] = strconv.Itoa(cards[0])
		out[AnnotationDevUnits] = strconv.FormatInt(cardUnits[cards[0]], 10)
	}
	if unit.MiB > 0 {
		out[AnnotationUnit] = unit.String()
	}
	return out
}

// BindAnnotationKeys lists every bind annotation key (those BindAnnotations writes, and the
// device plugin's progress), so a bind can clear stale ones and the informer keeps them all.
func BindAnnotationKeys() []string {
	return []string{AnnotationAllocation, AnnotationInitAllocation, AnnotationPodUnits,
		AnnotationAssigned, AnnotationAssumeTime, AnnotationIndex, AnnotationDevUnits, AnnotationAllocated, AnnotationUnit}
}

func nonNil(a Allocation) Allocation {
	if a == nil {
		return Allocation{}
	}
	return a
}

// ParseAllocated decodes AnnotationAllocated ("app/0,init/1") into the set of containers the
// device plugin has served.
func ParseAllocated(s string) (map[ContainerRef]bool, error) {
	out := map[ContainerRef]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		kind, num, found := strings.Cut(f, "/")
		i, err := strconv.Atoi(num)
		if !found || err != nil || i < 0 || (kind != "app" && kind != "init") {
			return nil, fmt.Errorf("annotation %s: %q is not app/N or init/N", AnnotationAllocated, f)
		}
		out[ContainerRef{InitList: kind == "init", Index: i}] = true
	}
	return out, nil
}

// FormatAllocated encodes a set of served containers for AnnotationAllocated, sorted.
func FormatAllocated(refs map[ContainerRef]bool) string {
	list := make([]string, 0, len(refs))
	for r, v := range refs {
		if v {
			list = append(list, r.String())
		}
	}
	sort.Strings(list)
	return strings.Join(list, ",")
}

// AssumeTime parses AnnotationAssumeTime (zero time when absent or malformed).
func AssumeTime(pod *corev1.Pod) time.Time {
	n, err := strconv.ParseInt(pod.Annotations[AnnotationAssumeTime], 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, n)
}
