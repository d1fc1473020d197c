package cache

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/policy"
)

func TestHostBook(t *testing.T) {
	alloc := policy.Host{CPUMilli: 8000, MemoryMiB: 1024}
	pod := func(uid, node string, cpu, mem int64) *Pod {
		return &Pod{objectMeta: objectMeta{uid: types.UID(uid)}, nodeName: node, host: policy.Host{CPUMilli: cpu, MemoryMiB: mem}}
	}
	type op func(h *hostBook)
	for _, tc := range []struct {
		name    string
		ops     []op
		want    policy.Host
		known   bool
		entries int // nodes with a book entry left
	}{
		{"unknown node", nil, policy.Host{}, false, 0},
		{"allocatable alone", []op{func(h *hostBook) { h.setNode("a", alloc, nil, nil) }}, alloc, true, 1},
		{"two pods bound", []op{
			func(h *hostBook) { h.setNode("a", alloc, nil, nil) },
			func(h *hostBook) { h.setPod(pod("p", "a", 1000, 100)) },
			func(h *hostBook) { h.setPod(pod("q", "a", 500, 50)) },
		}, policy.Host{CPUMilli: 6500, MemoryMiB: 874}, true, 1},
		{"a pod seen twice counts once", []op{
			func(h *hostBook) { h.setNode("a", alloc, nil, nil) },
			func(h *hostBook) { h.setPod(pod("p", "a", 1000, 100)) },
			func(h *hostBook) { h.setPod(pod("p", "a", 1000, 100)) },
		}, policy.Host{CPUMilli: 7000, MemoryMiB: 924}, true, 1},
		{"pod before its node", []op{
			func(h *hostBook) { h.setPod(pod("p", "a", 1000, 100)) },
			func(h *hostBook) { h.setNode("a", alloc, nil, nil) },
		}, policy.Host{CPUMilli: 7000, MemoryMiB: 924}, true, 1},
		{"node deleted, its pods still counted when it returns", []op{
			func(h *hostBook) { h.setNode("a", alloc, nil, nil) },
			func(h *hostBook) { h.setPod(pod("p", "a", 1000, 100)) },
			func(h *hostBook) { h.deleteNode("a") },
			func(h *hostBook) { h.setNode("a", alloc, nil, nil) },
		}, policy.Host{CPUMilli: 7000, MemoryMiB: 924}, true, 1},
		{"node deleted: unknown", []op{
			func(h *hostBook) { h.setNode("a", alloc, nil, nil) },
			func(h *hostBook) { h.setPod(pod("p", "a", 1000, 100)) },
			func(h *hostBook) { h.deleteNode("a") },
		}, policy.Host{}, false, 1},
		{"deleted node's last pod gone: no entry left", []op{
			func(h *hostBook) { h.setNode("a", alloc, nil, nil) },
			func(h *hostBook) { h.setPod(pod("p", "a", 1000, 100)) },
			func(h *hostBook) { h.deleteNode("a") },
			func(h *hostBook) { h.deletePod("p") },
		}, policy.Host{}, false, 0},
		{"pod unbound: forgotten", []op{
			func(h *hostBook) { h.setNode("a", alloc, nil, nil) },
			func(h *hostBook) { h.setPod(pod("p", "a", 1000, 100)) },
			func(h *hostBook) { h.setPod(pod("p", "", 1000, 100)) },
		}, alloc, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHostBook(nil)
			for _, o := range tc.ops {
				o(h)
			}
			got, _, known := h.free("a")
			if got != tc.want || known != tc.known {
				t.Errorf("free = %+v, %v; want %+v, %v", got, known, tc.want, tc.known)
			}
			if len(h.nodes) != tc.entries {
				t.Errorf("%d node entries, want %d", len(h.nodes), tc.entries)
			}
		})
	}
}
