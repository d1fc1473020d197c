package scripts

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// gpuAcceptanceChecks are hack/gpu-acceptance.sh's checks, in the order it prints them.
var gpuAcceptanceChecks = []string{"gpu", "nvml-tests", "limit-hook", "usage-watchdog", "mps", "preflight"}

// hostToolsPath is a folder of links to the host tools hack/lib/prereqs.sh declares that this
// machine has, as hack/doctor.sh --link makes for the e2e suite: a PATH of those alone, so no
// nvidia-smi, nvidia-cuda-mps-control or python3.
func hostToolsPath(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	words := strings.Join(bashArray(t, "hack/lib/prereqs.sh", "HOST_TOOLS"), " ")
	for _, e := range regexp.MustCompile(`"(\S+) \S+ \S+"`).FindAllStringSubmatch(words, -1) {
		cmd := e[1]
		if strings.Contains(cmd, "/") {
			continue // an absolute path: no command of PATH
		}
		if p, err := exec.LookPath(cmd); err == nil {
			if err := os.Symlink(p, filepath.Join(dir, cmd)); err != nil && !errors.Is(err, os.ErrExist) {
				t.Fatal(err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bash")); err != nil {
		t.Skip("no bash on this machine")
	}
	return dir
}

// runGPUAcceptance runs the script with PATH and extra environment, and a temporary folder of
// its own; it returns stdout, the exit status and that folder.
func runGPUAcceptance(t *testing.T, path string, env ...string) (string, int, string) {
	t.Helper()
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(path, "bash"), filepath.Join(repoRoot, "hack", "gpu-acceptance.sh"))
	cmd.Env = append([]string{"PATH=" + path, "HOME=" + tmp, "TMPDIR=" + tmp}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running hack/gpu-acceptance.sh: %v\n%s", err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Logf("stderr:\n%s", stderr.String())
	}
	return stdout.String(), code, tmp
}

// TestGPUAcceptanceWithoutGPU: on a machine without nvidia-smi and with NVML pointed at a
// library that does not exist, hack/gpu-acceptance.sh says "driver: none", SKIPs every check
// once, in order, for want of a GPU, exits 0, and builds nothing (its temporary folder stays
// empty).
func TestGPUAcceptanceWithoutGPU(t *testing.T) {
	path := hostToolsPath(t)
	out, code, tmp := runGPUAcceptance(t, path, "GPUSHARE_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1")
	if code != 0 {
		t.Errorf("exit status %d, want 0\n%s", code, out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if lines[0] != "driver: none" {
		t.Errorf("first line %q, want %q", lines[0], "driver: none")
	}
	var names []string
	for _, l := range lines[1:] {
		rest, ok := strings.CutPrefix(l, "SKIP ")
		if !ok {
			t.Errorf("line %q does not start with SKIP", l)
			continue
		}
		name, why, _ := strings.Cut(rest, ": ")
		names = append(names, name)
		if !strings.Contains(why, "no NVIDIA GPU/driver") {
			t.Errorf("line %q: want the reason no NVIDIA GPU/driver", l)
		}
	}
	if !slices.Equal(names, gpuAcceptanceChecks) {
		t.Errorf("checks %v, want each of %v once, in that order", names, gpuAcceptanceChecks)
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("the script left %d entries in its TMPDIR (it must build nothing without a GPU)", len(left))
	}
}

// TestGPUAcceptanceLibraryName: a GPUSHARE_NVML_LIBRARY the loader could not use under that
// name is refused (exit status 2) before anything runs.
func TestGPUAcceptanceLibraryName(t *testing.T) {
	out, code, _ := runGPUAcceptance(t, hostToolsPath(t), "GPUSHARE_NVML_LIBRARY=/opt/nvidia/libnvml.so")
	if code != 2 || out != "" {
		t.Errorf("exit status %d, stdout %q; want 2 and nothing", code, out)
	}
}

// TestGPUAcceptanceListsItsChecks: the checks the script runs (its should_run lines) are the
// ones the test above expects, so neither drifts from the other.
func TestGPUAcceptanceListsItsChecks(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "hack", "gpu-acceptance.sh"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^should_run (\S+) \d+ && check_\S+$`).FindAllSubmatch(raw, -1) {
		got = append(got, string(m[1]))
	}
	if !slices.Equal(got, gpuAcceptanceChecks) {
		t.Errorf("hack/gpu-acceptance.sh runs %v, want %v", got, gpuAcceptanceChecks)
	}
}
