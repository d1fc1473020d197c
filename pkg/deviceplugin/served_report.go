package deviceplugin

import (
	"encoding/json"
	"net/http"
	"sort"

	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// servedReport is GET /served: the containers served to live pods (pods the informer
// shows gone or finished are left out), sorted by namespace, name and container, and per
// card the units served.
func (p *Plugin) servedReport() gpushare.ServedReport {
	byUID := podsByUID(p.podsOnNode())
	now := p.node.Clock().Now()
	perCard := gpushare.CardUnits{}
	out := gpushare.ServedReport{Node: p.node.Name(), Cards: []gpushare.ServedCard{}, Containers: []gpushare.ServedContainer{}}
	for _, g := range p.ledger.snapshot() {
		if !g.keep(byUID, p.node.Name(), now) {
			continue
		}
		var served gpushare.PodAllocation
		for ref := range g.served {
			cu := copyUnits(g.alloc.For(ref))
			served.Set(ref, cu)
			out.Containers = append(out.Containers, gpushare.ServedContainer{
				Namespace: g.pod.Namespace, Name: g.pod.Name, UID: g.pod.UID, Container: ref.String(), Cards: cu,
			})
		}
		for c, u := range served.CardUsage(g.pod) {
			perCard[c] += u
		}
	}
	for _, c := range p.cards.List() {
		out.Cards = append(out.Cards, gpushare.ServedCard{Index: c.Index, UUID: c.UUID, TotalUnits: c.Units, ServedUnits: perCard[c.Index]})
	}
	sort.Slice(out.Containers, func(i, j int) bool {
		a, b := out.Containers[i], out.Containers[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Container < b.Container
	})
	return out
}

func (p *Plugin) serveServed(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(p.servedReport()); err != nil {
		klog.V(2).InfoS("Writing /served failed", "err", err)
	}
}
