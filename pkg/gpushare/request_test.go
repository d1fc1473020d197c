package gpushare

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestPodRequest(t *testing.T) {
	res := DefaultResources()
	tests := []struct {
		name      string
		pod       *corev1.Pod
		want      []ContainerRequest
		wantTotal int64
		wantErr   string
	}{
		{
			name:      "no gpu-mem",
			pod:       pod(nil, nil, ctr("a", 0, 0)),
			wantTotal: 0,
		},
		{
			name:      "one container, count defaults to 1",
			pod:       pod(nil, nil, ctr("a", 4, 0)),
			want:      []ContainerRequest{{Ref: ContainerRef{Index: 0}, Name: "a", Kind: App, Units: 4, Cards: 1}},
			wantTotal: 4,
		},
		{
			name: "two app containers add up: 4 + 6 = 10",
			pod:  pod(nil, nil, ctr("a", 4, 0), ctr("b", 0, 0), ctr("c", 6, 0)),
			want: []ContainerRequest{
				{Ref: ContainerRef{Index: 0}, Name: "a", Kind: App, Units: 4, Cards: 1},
				{Ref: ContainerRef{Index: 2}, Name: "c", Kind: App, Units: 6, Cards: 1},
			},
			wantTotal: 10,
		},
		{
			name:      "multi-card: 16 over 2 cards = 8 each",
			pod:       pod(nil, nil, ctr("a", 16, 2)),
			want:      []ContainerRequest{{Ref: ContainerRef{Index: 0}, Name: "a", Kind: App, Units: 16, Cards: 2}},
			wantTotal: 16,
		},
		{
			name: "init larger than apps: max(12, 4+2) = 12",
			pod:  pod(nil, []corev1.Container{ctr("init", 12, 0)}, ctr("a", 4, 0), ctr("b", 2, 0)),
			want: []ContainerRequest{
				{Ref: ContainerRef{InitList: true, Index: 0}, Name: "init", Kind: Init, Units: 12, Cards: 1},
				{Ref: ContainerRef{Index: 0}, Name: "a", Kind: App, Units: 4, Cards: 1},
				{Ref: ContainerRef{Index: 1}, Name: "b", Kind: App, Units: 2, Cards: 1},
			},
			wantTotal: 12,
		},
		{
			name: "sidecar counts with apps and before later inits: max(2+8, 2+3) = 10",
			pod:  pod(nil, []corev1.Container{sidecar(ctr("side", 2, 0)), ctr("init", 8, 0)}, ctr("a", 3, 0)),
			want: []ContainerRequest{
				{Ref: ContainerRef{InitList: true, Index: 0}, Name: "side", Kind: Sidecar, Units: 2, Cards: 1},
				{Ref: ContainerRef{InitList: true, Index: 1}, Name: "init", Kind: Init, Units: 8, Cards: 1},
				{Ref: ContainerRef{Index: 0}, Name: "a", Kind: App, Units: 3, Cards: 1},
			},
			wantTotal: 10,
		},
		{
			name:    "not divisible",
			pod:     pod(nil, nil, ctr("a", 10, 3)),
			wantErr: `container "a": aliyun.com/gpu-mem 10 is not divisible by aliyun.com/gpu-count 3`,
		},
		{
			name:    "count without mem",
			pod:     pod(nil, nil, ctr("a", 0, 2)),
			wantErr: `container "a": aliyun.com/gpu-count 2 without aliyun.com/gpu-mem`,
		},
		{
			name:    "count out of range",
			pod:     pod(nil, nil, ctr("a", 130, 65)),
			wantErr: "out of range 1..64",
		},
		{
			name:    "mem above the bound: 1<<32 + 1",
			pod:     pod(nil, nil, ctr("a", 1<<32+1, 0)),
			wantErr: `container "a": aliyun.com/gpu-mem 4294967297 is above the limit of 4294967296 units`,
		},
		{
			name:    "negative mem",
			pod:     pod(nil, nil, ctr("a", -4, 0)),
			wantErr: "is negative",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := res.PodRequest(tc.pod)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Containers); diff != "" {
				t.Errorf("containers (-want,+got):\n%s", diff)
			}
			if got.TotalUnits() != tc.wantTotal {
				t.Errorf("TotalUnits = %d, want %d", got.TotalUnits(), tc.wantTotal)
			}
		})
	}
}

func TestPodRequestRequestsWithoutLimits(t *testing.T) {
	c := corev1.Container{Name: "a", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		DefaultMemResource: resource.MustParse("3"),
	}}}
	got, err := DefaultResources().PodRequest(pod(nil, nil, c))
	if err != nil || got.TotalUnits() != 3 {
		t.Fatalf("got %+v, %v; want 3 units", got, err)
	}
}

func TestPodRequestCustomResourceNames(t *testing.T) {
	res := Resources{Mem: "example.com/vram", Count: "example.com/cards"}
	c := corev1.Container{Name: "a", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
		"example.com/vram":  resource.MustParse("8"),
		"example.com/cards": resource.MustParse("2"),
		DefaultMemResource:  resource.MustParse("99"), // ignored: not the configured name
	}}}
	got, err := res.PodRequest(pod(nil, nil, c))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Containers) != 1 || got.Containers[0].Units != 8 || got.Containers[0].PerCard() != 4 {
		t.Fatalf("got %+v, want 8 units on 2 cards", got.Containers)
	}
}

func TestPeakPerCard(t *testing.T) {
	res := DefaultResources()
	tests := []struct {
		name string
		pod  *corev1.Pod
		want int64
	}{
		{"one container", pod(nil, nil, ctr("a", 80, 0)), 80},
		{"multi-card: 16 over 2 = 8 per card", pod(nil, nil, ctr("a", 16, 2)), 8},
		{"apps add: 4 + 16/2 = 12", pod(nil, nil, ctr("a", 4, 0), ctr("b", 16, 2)), 12},
		{"init alone beats apps: max(4, 12) = 12", pod(nil, []corev1.Container{ctr("init", 12, 0)}, ctr("a", 4, 0)), 12},
		{"sidecar + init: max(2+3, 2+8) = 10", pod(nil, []corev1.Container{sidecar(ctr("side", 2, 0)), ctr("init", 8, 0)}, ctr("a", 3, 0)), 10},
		{"no gpu-mem", pod(nil, nil, ctr("a", 0, 0)), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := res.PodRequest(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			if got := req.PeakPerCard(); got != tc.want {
				t.Errorf("PeakPerCard = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestRawUnits(t *testing.T) {
	res := DefaultResources()
	tests := []struct {
		name string
		pod  *corev1.Pod
		want int64
	}{
		// invalid requests still give their raw sum: 10 (not divisible by 3) + 4 (init)
		{"not divisible, plus init", pod(nil, []corev1.Container{ctr("i", 4, 0)}, ctr("a", 10, 3)), 14},
		{"negative counts 0", pod(nil, nil, ctr("a", -4, 0), ctr("b", 2, 0)), 2},
		{"huge clamped: 1<<40 → 1<<32, + 1", pod(nil, nil, ctr("a", 1<<40, 0), ctr("b", 1, 0)), 1<<32 + 1},
		{"count only", pod(nil, nil, ctr("a", 0, 2)), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := res.RawUnits(tc.pod); got != tc.want {
				t.Errorf("RawUnits = %d, want %d", got, tc.want)
			}
		})
	}
}
