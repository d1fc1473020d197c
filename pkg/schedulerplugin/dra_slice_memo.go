package schedulerplugin

import (
	"sync"

	resourceapi "k8s.io/api/resource/v1"
)

// sliceMemo keeps the devices read from each ResourceSlice, by the slice object: the
// scheduler's informers replace a changed slice with a new object and never modify one, so
// a slice read in an earlier scheduling cycle need not be read again (reading a device's
// attributes and quantities is most of the cost of a node's cards). Safe for concurrent use;
// a nil memo reads every slice afresh.
type sliceMemo struct {
	mu sync.Mutex
	m  map[*resourceapi.ResourceSlice][]draDeviceRecord
}

// devices returns s's devices as read, reading them the first time.
func (m *sliceMemo) devices(s *resourceapi.ResourceSlice) []draDeviceRecord {
	if m != nil {
		m.mu.Lock()
		r, ok := m.m[s]
		m.mu.Unlock()
		if ok {
			return r
		}
	}
	r := make([]draDeviceRecord, len(s.Spec.Devices))
	for i := range s.Spec.Devices {
		r[i] = readDevice(&s.Spec.Devices[i])
	}
	if m != nil {
		m.mu.Lock()
		if m.m == nil {
			m.m = map[*resourceapi.ResourceSlice][]draDeviceRecord{}
		}
		m.m[s] = r
		m.mu.Unlock()
	}
	return r
}

// prune forgets the slices not in live, the current list, once the memo holds more than
// twice as many as live (plus a margin), so replaced slices do not pile up and pruning
// stays rare.
func (m *sliceMemo) prune(live []*resourceapi.ResourceSlice) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.m) <= 2*len(live)+64 {
		return
	}
	kept := make(map[*resourceapi.ResourceSlice][]draDeviceRecord, len(live))
	for _, s := range live {
		if r, ok := m.m[s]; ok {
			kept[s] = r
		}
	}
	m.m = kept
}
