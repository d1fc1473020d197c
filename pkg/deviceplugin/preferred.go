package deviceplugin

import (
	"context"
	"sort"

	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// GetPreferredAllocation steers kubelet's choice of fake IDs to the card(s) the following
// Allocate will give the container (the same pick, without waiting, and the same
// decision), so kubelet's records match reality. When no pod matches or the cards lack room
// it still answers (the following Allocate reports the error).
func (p *Plugin) GetPreferredAllocation(ctx context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	view := p.viewOf(p.podsOnNode())
	kp := p.kubeletPods(ctx)
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.ContainerRequests {
		var want map[string]int64 // card UUID → units
		if c, ok := p.candidateNow(view, kp, int64(cr.AllocationSize)); ok {
			if d, err := p.decideCards(c, view); err == nil {
				want = map[string]int64{}
				for i, c := range d.cards {
					want[c.UUID] = d.units[i]
				}
			}
		}
		ids := preferIDs(cr.AvailableDeviceIDs, cr.MustIncludeDeviceIDs, want, int(cr.AllocationSize))
		klog.V(4).InfoS("Preferred allocation", "size", cr.AllocationSize, "cards", want, "ids", len(ids))
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// preferIDs picks size IDs: the must-include ones, then available IDs from the wanted cards
// up to their units, then any available IDs. Output is sorted for stable answers.
func preferIDs(available, must []string, wantIn map[string]int64, size int) []string {
	want := make(map[string]int64, len(wantIn))
	for k, v := range wantIn {
		want[k] = v
	}
	chosen := map[string]bool{}
	out := make([]string, 0, size)
	take := func(id string) {
		if len(out) < size && !chosen[id] {
			chosen[id] = true
			out = append(out, id)
		}
	}
	for _, id := range must {
		take(id)
		if uuid, _, err := gpushare.ParseFakeDeviceID(id); err == nil && want[uuid] > 0 {
			want[uuid]--
		}
	}
	avail := append([]string(nil), available...)
	sort.Strings(avail)
	for _, id := range avail {
		uuid, _, err := gpushare.ParseFakeDeviceID(id)
		if err == nil && want[uuid] > 0 && !chosen[id] {
			want[uuid]--
			take(id)
		}
	}
	for _, id := range avail {
		take(id)
	}
	sort.Strings(out)
	return out
}
