package gpushare

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

func sampleUsage() Usage {
	return Usage{
		Version: UsageVersion,
		Time:    time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC),
		Cards: []CardUsage{
			{Index: 0, UUID: "GPU-a", UnattributedMiB: 300, Pods: []PodUsage{
				{Namespace: "ml", Name: "nb", UID: "uid-nb", Containers: []ContainerUsage{{Name: "main", UsedMiB: 5324}, {Name: "side", UsedMiB: 0, Unknown: true}}},
			}},
			{Index: 1, UUID: "GPU-b"},
		},
	}
}

func TestUsageRoundTrip(t *testing.T) {
	u := sampleUsage()
	s, err := u.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseUsage(s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(u, got); diff != "" {
		t.Errorf("round trip (-want,+got):\n%s", diff)
	}
}

// TestParseUsageHostile: every malformed, oversized or implausible value is an error, never
// a partial reading.
func TestParseUsageHostile(t *testing.T) {
	edit := func(f func(*Usage)) string {
		u := sampleUsage()
		f(&u)
		b, err := u.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	manyPods := func(u *Usage) {
		u.Cards[0].Pods = nil
		for i := range maxUsagePods + 1 {
			u.Cards[0].Pods = append(u.Cards[0].Pods, PodUsage{Namespace: "n", Name: "p", UID: types.UID("u" + fmt.Sprint(i))})
		}
	}
	tests := []struct {
		name, in, wantErr string
	}{
		{"not json", "{", "unexpected end"},
		{"empty", "", "unexpected end"},
		{"a list", "[]", "cannot unmarshal"},
		{"no version", `{"cards":[]}`, "version 0"},
		{"future version", `{"version":2,"cards":[]}`, "version 2"},
		{"oversized", `{"version":1,"cards":[],"x":"` + strings.Repeat("a", maxUsageBytes) + `"}`, "at most"},
		{"negative index", edit(func(u *Usage) { u.Cards[1].Index = -1 }), "out of range"},
		{"huge index", edit(func(u *Usage) { u.Cards[1].Index = MaxCardIndex }), "out of range"},
		{"duplicate index", edit(func(u *Usage) { u.Cards[1].Index = 0 }), "appears twice"},
		{"duplicate uuid", edit(func(u *Usage) { u.Cards[1].UUID = "GPU-a" }), "appears twice"},
		{"empty uuid", edit(func(u *Usage) { u.Cards[1].UUID = "" }), "UUID is empty"},
		{"long uuid", edit(func(u *Usage) { u.Cards[1].UUID = strings.Repeat("x", 129) }), "UUID is empty or longer"},
		{"negative unattributed", edit(func(u *Usage) { u.Cards[0].UnattributedMiB = -1 }), "unattributedMiB"},
		{"absurd unattributed", edit(func(u *Usage) { u.Cards[0].UnattributedMiB = 1 << 40 }), "unattributedMiB"},
		{"negative used", edit(func(u *Usage) { u.Cards[0].Pods[0].Containers[0].UsedMiB = -5 }), "usedMiB"},
		{"empty pod name", edit(func(u *Usage) { u.Cards[0].Pods[0].Name = "" }), "namespace or name"},
		{"long namespace", edit(func(u *Usage) { u.Cards[0].Pods[0].Namespace = strings.Repeat("n", 254) }), "namespace or name"},
		{"empty uid", edit(func(u *Usage) { u.Cards[0].Pods[0].UID = "" }), "uid empty"},
		{"duplicate pod", edit(func(u *Usage) { u.Cards[0].Pods = append(u.Cards[0].Pods, u.Cards[0].Pods[0]) }), "appears twice"},
		{"duplicate container", edit(func(u *Usage) { u.Cards[0].Pods[0].Containers[1].Name = "main" }), "repeated"},
		{"empty container", edit(func(u *Usage) { u.Cards[0].Pods[0].Containers[1].Name = "" }), "repeated"},
		{"too many pods", edit(manyPods), "pods"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseUsage(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ParseUsage error = %v, want one containing %q", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), AnnotationNodeUsage) {
				t.Errorf("error %q does not name the annotation", err)
			}
			if got.Version != 0 || got.Cards != nil {
				t.Errorf("ParseUsage returned a partial reading %+v", got)
			}
		})
	}
}

func TestUsageMarshalBound(t *testing.T) {
	u := Usage{Version: UsageVersion}
	for i := range 4000 {
		u.Cards = append(u.Cards, CardUsage{Index: i, UUID: strings.Repeat("x", 100) + fmt.Sprint(i)})
	}
	if _, err := u.Marshal(); err == nil {
		t.Error("Marshal of a usage over 256 KiB: want an error")
	}
}

func FuzzParseUsage(f *testing.F) {
	s, _ := sampleUsage().Marshal()
	f.Add(s)
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseUsage(s)
		if err != nil {
			return
		}
		if _, err := u.Marshal(); err != nil && len(s) <= maxUsageBytes/2 {
			t.Errorf("accepted %q but cannot write it back: %v", s, err)
		}
	})
}
