package inspect

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// podCompute is the pod's compute share on each card of alloc, in percent, where its
// containers declare shares (gpushare.WithComputeShares): on each card the app and sidecar
// containers' shares there add up, and a regular init container's counts alone (it runs
// before them); nil for a pod without any, or whose request (reqErr) does not read. Errors:
// the share annotation does not read.
func podCompute(p *corev1.Pod, req gpushare.PodRequest, reqErr error, alloc gpushare.PodAllocation) (map[int]int, error) {
	if reqErr != nil {
		return nil, nil
	}
	req, err := gpushare.WithComputeShares(p, req)
	if err != nil || !req.Computes() {
		return nil, err
	}
	running, inits := map[int]int{}, map[int]int{}
	for _, c := range req.Containers {
		m := alloc.App
		if c.Ref.InitList {
			m = alloc.Init
		}
		for card := range m[c.Ref.Index] {
			if c.Kind == gpushare.Init {
				inits[card] = max(inits[card], int(c.Compute))
			} else {
				running[card] += int(c.Compute)
			}
		}
	}
	out := map[int]int{}
	for card, v := range running {
		out[card] = v
	}
	for card, v := range inits {
		out[card] = max(out[card], v)
	}
	return out, nil
}

// addCompute sets each card's Compute where a pod of the card has a compute share there: the
// sum of its pods' shares.
func (n *nodeUsage) addCompute() {
	for i := range n.Cards {
		sum := 0
		for _, p := range n.Pods {
			if c, ok := p.card(n.Cards[i].Index); ok {
				sum += c.Compute
			}
		}
		n.Cards[i].Compute = sum
	}
}

// computeNote is " (core 25%)" for a pod with a compute share on card index; "" otherwise.
func computeNote(p podUsage, index int) string {
	if c, _ := p.card(index); c.Compute > 0 {
		return fmt.Sprintf(" (core %d%%)", c.Compute)
	}
	return ""
}

// computeLine is the "Compute :" line of a node one of whose pods has a compute share: per
// such card the share its pods hold ("GPU0 50%, GPU1 25%"); "" without any, so that such
// nodes print as before.
func computeLine(n nodeUsage) string {
	var cards []string
	for _, c := range n.Cards {
		if c.Compute > 0 {
			cards = append(cards, fmt.Sprintf("GPU%d %d%%", c.Index, c.Compute))
		}
	}
	if cards == nil {
		return ""
	}
	return "Compute :\t" + strings.Join(cards, ", ")
}
