package nvml

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSimSpec(t *testing.T) {
	t4 := SimCard{Model: "Tesla T4", MemoryMiB: 15079}
	a100 := SimCard{Model: "NVIDIA A100-SXM4-80GB", MemoryMiB: 81920}
	tests := []struct {
		name    string
		spec    string
		want    []SimCard
		wantErr string
	}{
		{name: "one t4", spec: "t4", want: []SimCard{t4}},
		{name: "count", spec: "a100-80gb:3", want: []SimCard{a100, a100, a100}},
		{name: "mixed keeps order", spec: "t4, A100-80GB:2", want: []SimCard{t4, a100, a100}},
		{name: "unknown model", spec: "k80", wantErr: `unknown model "k80"`},
		{name: "zero count", spec: "t4:0", wantErr: "must be an integer 1..64"},
		{name: "bad count", spec: "t4:x", wantErr: "must be an integer"},
		{name: "empty", spec: " , ", wantErr: "no cards"},
		{name: "too many", spec: "t4:40,t4:40", wantErr: "at most 64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSimSpec(tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseSimSpec(%q) error = %v, want it to contain %q", tc.spec, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSimSpec(%q): %v", tc.spec, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseSimSpec(%q) (-want,+got):\n%s", tc.spec, diff)
			}
		})
	}
}

func TestLoadSimFile(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    []SimCard
		wantErr string
	}{
		{
			name:    "two cards, one with uuid",
			content: "- model: Tesla T4\n  memoryMiB: 15079\n  uuid: GPU-aaa\n- model: NVIDIA L4\n  memoryMiB: 23034\n",
			want:    []SimCard{{Model: "Tesla T4", MemoryMiB: 15079, UUID: "GPU-aaa"}, {Model: "NVIDIA L4", MemoryMiB: 23034}},
		},
		{name: "duplicate uuid", content: "- {model: a, memoryMiB: 1, uuid: X}\n- {model: b, memoryMiB: 1, uuid: X}\n", wantErr: "appears twice"},
		{name: "no memory", content: "- {model: a}\n", wantErr: "memoryMiB 0 must be positive"},
		{name: "unknown field", content: "- {model: a, memoryMiB: 1, mem: 3}\n", wantErr: "unknown field"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "spec.yaml")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := LoadSimFile(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("LoadSimFile error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadSimFile: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("LoadSimFile (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSimulatedUUID(t *testing.T) {
	re := regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	a := SimulatedUUID("node-a", 0)
	if !re.MatchString(a) {
		t.Errorf("SimulatedUUID = %q, want GPU-8-4-4-4-12 hex", a)
	}
	if b := SimulatedUUID("node-a", 0); a != b {
		t.Errorf("SimulatedUUID not stable: %q then %q", a, b)
	}
	for _, other := range []string{SimulatedUUID("node-a", 1), SimulatedUUID("node-b", 0)} {
		if other == a {
			t.Errorf("SimulatedUUID collides: %q", a)
		}
	}
	// Pinned so that scripts and docs that predict UUIDs notice a scheme change.
	if got, want := a, "GPU-0e7fb55f-3e93-56b7-95bc-389a9ef6a004"; got != want {
		t.Errorf("SimulatedUUID(node-a,0) = %q, want %q", got, want)
	}
}

func TestParseFaults(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []int
		wantErr bool
	}{
		{name: "empty", in: "", want: nil},
		{name: "mixed separators and comments", in: "0, 2\n# card 3 is fine\n5 # flaky\n", want: []int{0, 2, 5}},
		{name: "negative", in: "-1", wantErr: true},
		{name: "word", in: "gpu0", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseFaults(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseFaults(%q) error = %v, wantErr %v", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseFaults(%q) (-want,+got):\n%s", tc.in, diff)
			}
		})
	}
}
