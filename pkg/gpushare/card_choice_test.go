package gpushare

import (
	"strings"
	"testing"
)

func TestParseCardChoice(t *testing.T) {
	type card struct{ model, uuid string }
	t4 := card{"Tesla T4", "GPU-t4"}
	a100 := card{"NVIDIA A100-SXM4-80GB", "GPU-a100"}
	h100 := card{"NVIDIA H100 80GB HBM3", "GPU-h100"}
	tests := []struct {
		name     string
		ann      map[string]string
		wantNil  bool
		wantErr  string
		allows   []card
		refuses  []card
		policy   string
		describe string
	}{
		{name: "no annotations", ann: map[string]string{"other": "x"}, wantNil: true},
		{
			name:   "HAMi use-gputype: case-insensitive substring, spaces trimmed",
			ann:    map[string]string{AnnotationHAMiUseGPUType: "a100, H100"},
			allows: []card{a100, h100}, refuses: []card{t4},
			describe: "of type a100 or H100",
		},
		{
			name:   "gpushare nouse-gputype",
			ann:    map[string]string{AnnotationAvoidGPUType: "T4"},
			allows: []card{a100, h100}, refuses: []card{t4},
			describe: "not of type T4",
		},
		{
			name:   "use-gpuuuid is exact",
			ann:    map[string]string{AnnotationHAMiUseGPUUUID: "GPU-a100"},
			allows: []card{a100}, refuses: []card{t4, h100, {"NVIDIA A100", "GPU-a1000"}, {"NVIDIA A100", "gpu-a100"}},
			describe: "with UUID GPU-a100",
		},
		{
			name:   "nouse-gpuuuid",
			ann:    map[string]string{AnnotationAvoidGPUUUID: "GPU-t4,GPU-h100"},
			allows: []card{a100}, refuses: []card{t4, h100},
		},
		{
			name: "every annotation must pass",
			ann: map[string]string{
				AnnotationHAMiUseGPUType: "NVIDIA", AnnotationHAMiAvoidGPUUUID: "GPU-h100",
			},
			allows: []card{a100}, refuses: []card{t4, h100},
			describe: "(of type NVIDIA; not with UUID GPU-h100)",
		},
		{
			name:   "card-policy alone restricts nothing",
			ann:    map[string]string{AnnotationCardPolicy: "spread"},
			allows: []card{t4, a100}, policy: "spread",
		},
		{name: "card-policy binpack", ann: map[string]string{AnnotationCardPolicy: "binpack"}, policy: "binpack"},
		{name: "card-policy unknown", ann: map[string]string{AnnotationCardPolicy: "fgd"}, wantErr: `annotation gpushare.io/card-policy="fgd": want binpack or spread`},
		{name: "card-policy wrong case", ann: map[string]string{AnnotationCardPolicy: "Spread"}, wantErr: "want binpack or spread"},
		{name: "empty value", ann: map[string]string{AnnotationUseGPUType: ""}, wantErr: `annotation gpushare.io/use-gputype: "" has an empty entry`},
		{name: "empty entry", ann: map[string]string{AnnotationHAMiUseGPUType: "A100,,T4"}, wantErr: "has an empty entry"},
		{name: "too many entries", ann: map[string]string{AnnotationUseGPUType: strings.Repeat("a,", 16) + "a"}, wantErr: "17 entries, above the limit of 16"},
		{name: "too long value", ann: map[string]string{AnnotationUseGPUType: strings.Repeat("a", 1025)}, wantErr: "1025 bytes, above the limit of 1024"},
		{name: "too long entry", ann: map[string]string{AnnotationUseGPUType: strings.Repeat("a", 129)}, wantErr: "longer than 128 bytes"},
		{name: "control character", ann: map[string]string{AnnotationUseGPUType: "A1\x0000"}, wantErr: "control character"},
		{name: "UUID with a space", ann: map[string]string{AnnotationUseGPUUUID: "GPU-1 GPU-2"}, wantErr: `UUID "GPU-1 GPU-2" has a space`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseCardChoice(tt.ann)
			if !wantErr(t, err, tt.wantErr) {
				return
			}
			if (c == nil) != tt.wantNil {
				t.Fatalf("choice = %+v, want nil %v", c, tt.wantNil)
			}
			for _, cd := range tt.allows {
				if !c.Allows(cd.model, cd.uuid) {
					t.Errorf("refuses %v", cd)
				}
			}
			for _, cd := range tt.refuses {
				if c.Allows(cd.model, cd.uuid) {
					t.Errorf("allows %v", cd)
				}
			}
			if c != nil && c.Policy != tt.policy {
				t.Errorf("policy %q, want %q", c.Policy, tt.policy)
			}
			if tt.describe != "" && c.Describe() != tt.describe {
				t.Errorf("Describe() = %q, want %q", c.Describe(), tt.describe)
			}
		})
	}
}

func TestPlacementRequest(t *testing.T) {
	res := DefaultResources()
	ann := map[string]string{AnnotationUseGPUType: "A100", AnnotationCardPolicy: "spread"}
	tests := []struct {
		name       string
		ann        map[string]string
		mem        int64
		wantChoice bool
		wantErr    string
	}{
		{name: "gpu-mem pod with choice", ann: ann, mem: 4, wantChoice: true},
		{name: "gpu-mem pod without choice", mem: 4},
		{name: "pod without gpu-mem ignores its card annotations", ann: map[string]string{AnnotationCardPolicy: "x"}},
		{name: "invalid choice", ann: map[string]string{AnnotationCardPolicy: "x"}, mem: 4, wantErr: "card-policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := res.PlacementRequest(pod(tt.ann, nil, ctr("a", tt.mem, 0)))
			if !wantErr(t, err, tt.wantErr) {
				return
			}
			if (req.Choice != nil) != tt.wantChoice {
				t.Fatalf("Choice = %+v, want set %v", req.Choice, tt.wantChoice)
			}
			plain, _ := res.PodRequest(pod(tt.ann, nil, ctr("a", tt.mem, 0)))
			if plain.Choice != nil {
				t.Fatal("PodRequest reads the card choice")
			}
		})
	}
}

func TestCardChoiceAnnotations(t *testing.T) {
	c, err := ParseCardChoice(map[string]string{AnnotationCardPolicy: "spread", AnnotationHAMiUseGPUType: "A100, H100"})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(c.Annotations(), " ")
	if want := "gpushare.io/card-policy=spread nvidia.com/use-gputype=A100,H100"; got != want {
		t.Fatalf("Annotations() = %q, want %q", got, want)
	}
}

// wantErr checks err against want ("": no error, else a part of its text) and reports
// whether the case goes on (no error was wanted).
func wantErr(t *testing.T, err error, want string) bool {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatal(err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("err = %v, want %q", err, want)
	}
	return want == ""
}

// FuzzParseCardChoice: tenant-written annotations never panic, and a parsed choice has
// bounded entries that Allows and Describe handle.
func FuzzParseCardChoice(f *testing.F) {
	for _, s := range []string{"A100", "a100, H100", "GPU-1,GPU-2", "", ",", "spread", strings.Repeat("x,", 20)} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, types, policy string) {
		c, err := ParseCardChoice(map[string]string{
			AnnotationHAMiUseGPUType: types, AnnotationAvoidGPUUUID: types, AnnotationCardPolicy: policy,
		})
		if err != nil {
			return
		}
		for _, r := range c.Rules {
			if len(r.Values) == 0 || len(r.Values) > maxCardChoiceEntries {
				t.Fatalf("%d entries", len(r.Values))
			}
		}
		_ = c.Allows("NVIDIA A100", "GPU-1")
		if len(c.Describe()) > 4*maxCardChoiceValueBytes {
			t.Fatalf("description of %d bytes", len(c.Describe()))
		}
	})
}
