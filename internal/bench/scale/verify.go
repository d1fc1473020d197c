package scale

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// CardCheck is the per-card accounting rebuilt from the pods' allocation annotations.
type CardCheck struct {
	// Used is node → card index → units held by the bound pods.
	Used map[string]gpushare.CardUnits `json:"-"`
	// Nodes is the number of nodes in Used.
	Nodes int `json:"nodes"`
	// Over lists "node/card: used > capacity" for every card over its capacity.
	Over []string `json:"over"`
	// Unannotated lists bound gpu-mem pods without an allocation annotation.
	Unannotated []string `json:"unannotated"`
}

// checkCards sums what each bound pod holds on each card (from its allocation annotations)
// and reports every card above capacity units. Pods not bound are skipped.
func checkCards(res gpushare.Resources, pods []*corev1.Pod, capacity int64) (CardCheck, error) {
	c := CardCheck{Used: map[string]gpushare.CardUnits{}, Over: []string{}, Unannotated: []string{}}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			continue
		}
		a, ok, err := res.ReadAllocation(p)
		if err != nil {
			return c, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		if !ok {
			c.Unannotated = append(c.Unannotated, p.Name)
			continue
		}
		used := c.Used[p.Spec.NodeName]
		if used == nil {
			used = gpushare.CardUnits{}
			c.Used[p.Spec.NodeName] = used
		}
		for card, u := range a.CardUsage(p) {
			used[card] += u
		}
	}
	c.Nodes = len(c.Used)
	for node, cards := range c.Used {
		for card, u := range cards {
			if u > capacity {
				c.Over = append(c.Over, fmt.Sprintf("%s/%d: %d > %d", node, card, u, capacity))
			}
		}
	}
	sort.Strings(c.Over)
	sort.Strings(c.Unannotated)
	return c, nil
}
