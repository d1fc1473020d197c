package deviceplugin

import (
	"encoding/json"
	"net/http"
	"sort"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// ServedReport is the answer of GET /served: what this share-plugin process handed out to
// the live pods of its node, for checks that compare it with the extender's ledger.
type ServedReport struct {
	Node       string            `json:"node"`
	Cards      []ServedCard      `json:"cards"`
	Containers []ServedContainer `json:"containers"`
}

// ServedCard is one card: its size and the units of the containers served on it, summed
// per pod by the Kubernetes effective-request rule (gpushare.PodAllocation.CardUsage: a
// regular init container, which runs alone, is not added to the app containers). All in
// gpu-mem units.
type ServedCard struct {
	Index       int    `json:"index"`
	UUID        string `json:"uuid"`
	TotalUnits  int64  `json:"totalUnits"`
	ServedUnits int64  `json:"servedUnits"`
}

// ServedContainer is one container this process served: its cards and units per card
// index ({"0":4}).
type ServedContainer struct {
	Namespace string             `json:"namespace"`
	Name      string             `json:"name"`
	UID       types.UID          `json:"uid"`
	Container string             `json:"container"` // gpushare.ContainerRef: app/0, init/1
	Cards     gpushare.CardUnits `json:"cards"`
}

// Served reports the containers served to live pods (pods the informer shows gone or
// finished are left out), sorted by namespace, name and container, and per card the units
// served.
func (p *Plugin) Served() ServedReport {
	byUID := podsByUID(p.podsOnNode())
	now := p.cfg.Clock.Now()
	perCard := gpushare.CardUnits{}
	out := ServedReport{Node: p.cfg.NodeName, Cards: []ServedCard{}, Containers: []ServedContainer{}}
	p.recMu.Lock()
	for _, r := range p.rec {
		if !r.keep(byUID, p.cfg.NodeName, now) {
			continue
		}
		var served gpushare.PodAllocation
		for ref := range r.served {
			cu := copyUnits(r.claim.For(ref))
			served.Set(ref, cu)
			out.Containers = append(out.Containers, ServedContainer{
				Namespace: r.pod.Namespace, Name: r.pod.Name, UID: r.pod.UID, Container: ref.String(), Cards: cu,
			})
		}
		for c, u := range served.CardUsage(r.pod) {
			perCard[c] += u
		}
	}
	p.recMu.Unlock()
	for _, c := range p.cards.list {
		out.Cards = append(out.Cards, ServedCard{Index: c.Index, UUID: c.UUID, TotalUnits: c.Units, ServedUnits: perCard[c.Index]})
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
	if err := json.NewEncoder(w).Encode(p.Served()); err != nil {
		klog.V(2).InfoS("Writing /served failed", "err", err)
	}
}
