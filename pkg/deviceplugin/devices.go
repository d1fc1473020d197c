package deviceplugin

import (
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// maxMessageBytes is kubelet's default gRPC receive limit (4 MiB): a larger ListAndWatch
// response is dropped by kubelet and the node never advertises gpu-mem.
const maxMessageBytes = 4 << 20

// deviceList is the ListAndWatch payload: one fake device per unit of every card, Healthy
// or Unhealthy as the card.
func deviceList(cards []gpushare.Device, healthy func(uuid string) bool) []*pluginapi.Device {
	var n int64
	for _, c := range cards {
		n += c.Units
	}
	out := make([]*pluginapi.Device, 0, n)
	for _, c := range cards {
		h := pluginapi.Healthy
		if !healthy(c.UUID) {
			h = pluginapi.Unhealthy
		}
		for j := 0; j < int(c.Units); j++ {
			out = append(out, &pluginapi.Device{ID: gpushare.FakeDeviceID(c.UUID, j), Health: h})
		}
	}
	return out
}

// messageBytes is the encoded size of the largest ListAndWatch response for cards (every
// device Unhealthy, the longer health string).
func messageBytes(cards []gpushare.Device) int {
	return proto.Size(&pluginapi.ListAndWatchResponse{Devices: deviceList(cards, func(string) bool { return false })})
}

// checkMessageSize fails when the ListAndWatch response for cards at unit would exceed
// kubelet's gRPC limit, naming the smallest unit (in whole MiB) that fits.
func checkMessageSize(cards []gpushare.Device, unit gpushare.Unit) error {
	size := messageBytes(withUnit(cards, unit))
	if size <= maxMessageBytes {
		return nil
	}
	var maxMiB int64
	for _, c := range cards {
		maxMiB = max(maxMiB, c.MemoryMiB)
	}
	// The message shrinks as the unit grows, so search the smallest unit that fits.
	m := sort.Search(int(maxMiB), func(i int) bool {
		return messageBytes(withUnit(cards, gpushare.Unit{MiB: int64(i) + 1})) <= maxMessageBytes
	}) + 1
	return fmt.Errorf("--memory-unit=%s advertises %d fake devices (%d bytes), over kubelet's %d-byte gRPC limit; the smallest unit that fits is %s",
		unit, totalUnits(withUnit(cards, unit)), size, maxMessageBytes, gpushare.Unit{MiB: int64(m)})
}

func withUnit(cards []gpushare.Device, unit gpushare.Unit) []gpushare.Device {
	out := make([]gpushare.Device, len(cards))
	for i, c := range cards {
		c.Units = unit.UnitsOf(c.MemoryMiB)
		out[i] = c
	}
	return out
}

func totalUnits(cards []gpushare.Device) int64 {
	var n int64
	for _, c := range cards {
		n += c.Units
	}
	return n
}
