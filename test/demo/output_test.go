package demo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputCheck: what the demo printed on two recorded runs passes, and each way the
// README's promise can break is caught.
func TestOutputCheck(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	dp, dra := read("device-plugin.txt"), read("dra.txt")
	deviceplugin := Want{Backend: "device-plugin", RealNode: true}
	cases := []struct {
		name    string
		out     string
		want    Want
		problem string // "" passes; else a substring of one problem
	}{
		{"device plugin run", dp, deviceplugin, ""},
		{"DRA run", dra, Want{Backend: "dra", RealNode: true}, ""},
		{"kwok node prints no GPU environment", dropLines(dp, "NVIDIA_VISIBLE_DEVICES"), Want{Backend: "device-plugin"}, ""},
		{"occupancy line lost", strings.ReplaceAll(dp, "12/14 (85%)", "8/14 (57%)"), deviceplugin, "12/14 (85%)"},
		{"cluster-wide occupancy is not the node's", dropLines(dp, "12/14 (85%)"), deviceplugin, "12/14 (85%)"},
		{"fourth notebook Running", strings.Replace(dp, "0/1     Pending", "1/1     Running", 1), deviceplugin, "want 3 notebooks Running and 1 Pending"},
		{"a notebook missing", dropLines(dp, "10.88.0.4 "), deviceplugin, "want 3 notebooks Running"},
		{"no pending reason", strings.Replace(dp, "0/4 nodes are available: 1 Insufficient", "(no FailedScheduling event yet) ", 1), deviceplugin, "pending reason is missing"},
		{"reason of the other back end", dra, Want{Backend: "device-plugin", RealNode: true}, `does not name "aliyun.com/gpu-mem"`},
		{"a notebook given no card", dropLines(dp, "tf-notebook-2-867b977c-glxwv: NVIDIA_VISIBLE_DEVICES"), deviceplugin, "NVIDIA_VISIBLE_DEVICES"},
		{"a notebook given another grant", strings.Replace(dp, "x554f: ALIYUN_COM_GPU_MEM_CONTAINER=4", "x554f: ALIYUN_COM_GPU_MEM_CONTAINER=14", 1), deviceplugin, "ALIYUN_COM_GPU_MEM_CONTAINER=4"},
		{"no PATH export", dropLines(dp, "export PATH="), deviceplugin, "export PATH="},
		{"no KUBECONFIG export", dropLines(dp, "export KUBECONFIG="), deviceplugin, "export KUBECONFIG="},
		{"nothing printed", "make: *** [Makefile:104: demo] Error 1\n", deviceplugin, "want 3 notebooks"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			problems := ParseOutput(tc.out).Check(tc.want)
			if tc.problem == "" {
				if len(problems) > 0 {
					t.Errorf("want no problem, got:\n%s", strings.Join(problems, "\n"))
				}
				return
			}
			for _, p := range problems {
				if strings.Contains(p, tc.problem) {
					return
				}
			}
			t.Errorf("want a problem containing %q, got %q", tc.problem, problems)
		})
	}
}

// TestParseOutputExports: the export lines come back verbatim, for a shell to run.
func TestParseOutputExports(t *testing.T) {
	o := ParseOutput("[demo] log line\n=== Title\nbody\nexport KUBECONFIG=/s/kubeconfig\nexport PATH=/s/bin:$PATH\n")
	want := []string{"export KUBECONFIG=/s/kubeconfig", "export PATH=/s/bin:$PATH"}
	if strings.Join(o.Exports, "\n") != strings.Join(want, "\n") {
		t.Errorf("exports %q, want %q", o.Exports, want)
	}
	if len(o.Titles) != 1 || o.Titles[0] != "Title" {
		t.Errorf("titles %q, want [Title]", o.Titles)
	}
}

// dropLines removes every line containing s.
func dropLines(text, s string) string {
	var keep []string
	for _, l := range strings.Split(text, "\n") {
		if !strings.Contains(l, s) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
