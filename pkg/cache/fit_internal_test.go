package cache

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// TestFitsOneContainerIsExact: the shortcut must answer exactly as policy.Place does for
// single-container requests, in both directions (too strict would silently cost a Place
// call per node, too lenient would pass nodes that cannot take the pod).
func TestFitsOneContainerIsExact(t *testing.T) {
	pol, err := policy.New("binpack")
	if err != nil {
		t.Fatal(err)
	}
	for cards := 1; cards <= 7; cards++ {
		for seed := 0; seed < 30; seed++ {
			n := newNodeState("n")
			n.known = true
			devs := make([]gpushare.Device, cards)
			for j := range devs {
				devs[j] = gpushare.Device{Index: j, Units: int64(8 + 8*((seed+j)%2)), Healthy: (seed+j)%4 != 0}
				if used := int64((seed*5 + j*3) % 11); used > 0 {
					n.pods[types.UID(fmt.Sprintf("p%d", j))] = reservedEntry(&Pod{reserved: true, usage: cardUsage{{card: j, units: used}}})
				}
			}
			n.setInventory(gpushare.Inventory{Devices: devs}, graceClock{})
			for units := int64(1); units <= 20; units++ {
				for count := 1; count <= cards; count++ {
					req := gpushare.PodRequest{Containers: []gpushare.ContainerRequest{{Name: "c", Units: units * int64(count), Cards: count}}}
					_, placeErr := pol.Place(n.view(), req)
					if got, want := n.fitsOneContainer(req), placeErr == nil; got != want {
						t.Errorf("cards=%d seed=%d need %d on %d cards: shortcut %v, Place %v (%v)", cards, seed, units, count, got, want, n.cards)
					}
				}
			}
		}
	}
}
