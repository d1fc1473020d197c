package dra

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// preparedReport is GET /prepared: the claims the checkpoint holds, sorted by namespace,
// name and UID, each with its units per card.
func (d *Driver) preparedReport() gpushare.DRAPreparedReport {
	prepared := d.preparedClaims()
	out := gpushare.DRAPreparedReport{Node: d.cfg.NodeName, Claims: make([]gpushare.DRAPreparedClaim, 0, len(prepared))}
	for uid, p := range prepared {
		c := gpushare.DRAPreparedClaim{UID: uid, Namespace: p.Namespace, Name: p.Name, Cards: gpushare.CardUnits{}}
		for _, dev := range p.Devices {
			c.Cards[dev.CardIndex] += dev.Units
		}
		out.Claims = append(out.Claims, c)
	}
	slices.SortFunc(out.Claims, func(a, b gpushare.DRAPreparedClaim) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name), strings.Compare(string(a.UID), string(b.UID)))
	})
	return out
}

func (d *Driver) servePrepared(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(d.preparedReport()); err != nil {
		klog.V(2).InfoS("Writing /prepared failed", "err", err)
	}
}
