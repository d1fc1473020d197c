package gpushare

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(ann map[string]string, mem, count string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: ann}}
	n.Status.Allocatable = corev1.ResourceList{}
	if mem != "" {
		n.Status.Allocatable[DefaultMemResource] = resource.MustParse(mem)
	}
	if count != "" {
		n.Status.Allocatable[DefaultCountResource] = resource.MustParse(count)
	}
	return n
}

func TestNodeInventory(t *testing.T) {
	res := DefaultResources()
	hetero := `{"unit":"GiB","devices":[{"index":0,"uuid":"GPU-a","model":"Tesla T4","units":14,"memoryMiB":15079,"healthy":true},` +
		`{"index":1,"uuid":"GPU-b","model":"A100-SXM4-80GB","units":80,"memoryMiB":81920,"healthy":false}]}`
	tests := []struct {
		name       string
		node       *corev1.Node
		want       Inventory
		wantSource InventorySource
		wantErr    string
	}{
		{
			name: "annotation wins over allocatable, cards keep their own sizes",
			node: node(map[string]string{AnnotationNodeInventory: hetero}, "94", "2"),
			want: Inventory{Unit: GiB, Devices: []Device{
				{Index: 0, UUID: "GPU-a", Model: "Tesla T4", Units: 14, MemoryMiB: 15079, Healthy: true},
				{Index: 1, UUID: "GPU-b", Model: "A100-SXM4-80GB", Units: 80, MemoryMiB: 81920, Healthy: false},
			}},
			wantSource: FromAnnotation,
		},
		{
			name:       "MiB unit is kept",
			node:       node(map[string]string{AnnotationNodeInventory: `{"unit":"MiB","devices":[{"index":0,"units":15079,"healthy":true}]}`}, "", ""),
			want:       Inventory{Unit: Unit{MiB: 1}, Devices: []Device{{Index: 0, Units: 15079, Healthy: true}}},
			wantSource: FromAnnotation,
		},
		{
			name:       "fallback: 32 / 2 = two cards of 16",
			node:       node(nil, "32", "2"),
			want:       Inventory{Unit: GiB, Devices: []Device{{Index: 0, Units: 16, Healthy: true}, {Index: 1, Units: 16, Healthy: true}}},
			wantSource: FromAllocatable,
		},
		{
			name:       "fallback rounds down: 33 / 2 = 16 each",
			node:       node(nil, "33", "2"),
			want:       Inventory{Unit: GiB, Devices: []Device{{Index: 0, Units: 16, Healthy: true}, {Index: 1, Units: 16, Healthy: true}}},
			wantSource: FromAllocatable,
		},
		{
			name:       "no gpu-mem: no cards, no error",
			node:       node(nil, "", ""),
			want:       Inventory{Unit: GiB},
			wantSource: FromAllocatable,
		},
		{
			name:       "gpu-mem without gpu-count is an error",
			node:       node(nil, "16", ""),
			want:       Inventory{Unit: GiB},
			wantSource: FromAllocatable,
			wantErr:    "aliyun.com/gpu-count is missing",
		},
		{
			name:       "malformed annotation falls back and reports",
			node:       node(map[string]string{AnnotationNodeInventory: `{not json`}, "16", "1"),
			want:       Inventory{Unit: GiB, Devices: []Device{{Index: 0, Units: 16, Healthy: true}}},
			wantSource: FromAllocatable,
			wantErr:    AnnotationNodeInventory,
		},
		{
			name:       "annotation out of range: no cards, no fallback",
			node:       node(map[string]string{AnnotationNodeInventory: `{"devices":[{"index":0,"units":9000000000000000000}]}`}, "16", "1"),
			want:       Inventory{Unit: GiB},
			wantSource: FromAnnotation,
			wantErr:    "card 0 units 9000000000000000000 out of range",
		},
		{
			name:       "allocatable out of range: no cards",
			node:       node(nil, "9000000000000000000", "1"),
			want:       Inventory{Unit: GiB},
			wantSource: FromAllocatable,
			wantErr:    "units per card 9000000000000000000 out of range",
		},
		{
			name:       "allocatable card count out of range",
			node:       node(nil, "2050", "1025"),
			want:       Inventory{Unit: GiB},
			wantSource: FromAllocatable,
			wantErr:    "card count 1025 out of range",
		},
		{
			name:       "duplicate card index is rejected",
			node:       node(map[string]string{AnnotationNodeInventory: `{"devices":[{"index":0,"units":1},{"index":0,"units":1}]}`}, "", ""),
			want:       Inventory{Unit: GiB},
			wantSource: FromAllocatable,
			wantErr:    "appears twice",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, src, err := res.NodeInventory(tc.node)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error = %v, want containing %q", err, tc.wantErr)
			}
			if src != tc.wantSource {
				t.Errorf("source = %q, want %q", src, tc.wantSource)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("inventory (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestInventoryMarshalRoundTrip(t *testing.T) {
	in := Inventory{Unit: Unit{MiB: 256}, Devices: []Device{{Index: 3, UUID: "GPU-x", Model: "Tesla T4", Units: 58, MemoryMiB: 15079, Healthy: true}}}
	s, err := in.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s, `"unit":"256MiB"`) {
		t.Errorf("unit not encoded by name: %s", s)
	}
	out, err := ParseInventory(s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("round trip (-want,+got):\n%s", diff)
	}
	if in.TotalUnits() != 58 {
		t.Errorf("TotalUnits = %d", in.TotalUnits())
	}
	if d, ok := in.Device(3); !ok || d.UUID != "GPU-x" {
		t.Errorf("Device(3) = %+v, %v", d, ok)
	}
}
