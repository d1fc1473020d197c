//go:build demo

package demo

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// repoRoot is the repository root, two folders above this package.
const repoRoot = "../.."

// TestDemo: the README's first command as a new user runs it, on a machine where only the
// README's host tools are on PATH and no cluster runs: `make demo` ends with rc 0 and the
// README's result; a new shell with only the printed exports runs `kubectl inspect
// gpushare`; every manifest under deploy/examples applies as its own comment says; `make
// demo` again on the running cluster, then with MODE=plugin and with BACKEND=dra, each
// with the same result. The cluster is taken down at the end.
func TestDemo(t *testing.T) {
	u := newUser(t)
	u.make(t, "demo-down")
	t.Cleanup(func() { u.make(t, "demo-down") })

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"make demo on a new machine", func(t *testing.T) { u.demo(t, Want{Backend: "device-plugin"}) }},
		{"kubectl inspect gpushare in a new shell with the demo's exports", u.inspectInNewShell},
		{"every manifest of deploy/examples applies as its comment says", u.applyExamples},
		{"make demo again on the running cluster", func(t *testing.T) { u.demo(t, Want{Backend: "device-plugin"}) }},
		{"make demo MODE=plugin", func(t *testing.T) { u.demo(t, Want{Backend: "device-plugin"}, "MODE=plugin") }},
		{"make demo BACKEND=dra", func(t *testing.T) {
			u.requireRealNode(t)
			u.demo(t, Want{Backend: "dra"}, "BACKEND=dra")
		}},
		{"make demo back on the device plugin", func(t *testing.T) { u.demo(t, Want{Backend: "device-plugin"}) }},
	}
	for _, s := range steps {
		// Each step starts from the cluster the last one left: stop at the first failure.
		if !t.Run(s.name, s.run) {
			t.FailNow()
		}
	}
}

// user runs commands as a new user's shell does: the README's host tools on PATH (the
// links hack/doctor.sh --link makes), no variable of the project's set.
type user struct {
	repo     string
	hostPath string
	// exports are the `export` lines the last demo printed.
	exports []string
}

func newUser(t *testing.T) *user {
	t.Helper()
	repo, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	u := &user{repo: repo, hostPath: filepath.Join(t.TempDir(), "host-path")}
	cmd := exec.Command(filepath.Join(repo, "hack", "doctor.sh"), "--link", u.hostPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/doctor.sh --link: %v\n%s", err, out)
	}
	return u
}

// env is the environment of the user's shell: this process's, less PATH, the variables
// make passes to its children and the project's own settings (GPUSHARE_*, MODE, BACKEND),
// plus extra.
func (u *user) env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "PATH", name == "KUBECONFIG", name == "MAKEFLAGS", name == "MFLAGS", name == "MAKELEVEL",
			name == "MODE", name == "BACKEND", strings.HasPrefix(name, "GPUSHARE_"):
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "PATH="+u.hostPath), extra...)
}

// make runs `make ARGS...` in the repository, streaming its output to the test log's
// stderr, and returns its stdout. Fails the test on a non-zero exit.
func (u *user) make(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(u.hostPath, "make"), args...)
	cmd.Dir = u.repo
	cmd.Env = u.env()
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, os.Stderr)
	cmd.Stderr = os.Stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("make %s: %v in %s", strings.Join(args, " "), exitStatus(err), time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("make %s: %v", strings.Join(args, " "), err)
	}
	return out.String()
}

func exitStatus(err error) string {
	if err == nil {
		return "rc 0"
	}
	return err.Error()
}

// demo runs `make demo ARGS...` and checks what it printed against w.
func (u *user) demo(t *testing.T, w Want, args ...string) {
	t.Helper()
	out := ParseOutput(u.make(t, append([]string{"demo"}, args...)...))
	w.RealNode = u.nodeMode(t) == "real"
	for _, p := range out.Check(w) {
		t.Error(p)
	}
	u.exports = out.Exports
}

// nodeMode is the local cluster's node mode (real or kwok), as hack/cluster-up.sh recorded it.
func (u *user) nodeMode(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(u.repo, "_output", "cluster", "node-mode"))
	if err != nil {
		t.Fatalf("reading the demo cluster's node mode: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// requireRealNode skips where the machine cannot run the real node (not root): the DRA
// demo needs kubelet. CI runs as root, where it never skips.
func (u *user) requireRealNode(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the DRA demo needs the real node, which needs root")
	}
}

// shell runs script in a new bash with only the user's host tools on PATH, the home folder
// and the demo's exports run first: what a new terminal has after the user pasted them.
func (u *user) shell(t *testing.T, script string) string {
	t.Helper()
	if len(u.exports) == 0 {
		t.Fatal("the demo printed no export lines")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	full := "set -o errexit -o pipefail\n" + strings.Join(u.exports, "\n") + "\n" + script
	cmd := exec.CommandContext(ctx, filepath.Join(u.hostPath, "bash"), "-c", full)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"HOME=" + os.Getenv("HOME"), "PATH=" + u.hostPath}
	out, err := cmd.CombinedOutput()
	t.Logf("new shell:\n%s\n%s", full, out)
	if err != nil {
		t.Fatalf("new shell: %v\n%s", err, out)
	}
	return string(out)
}

// inspectInNewShell: `kubectl inspect gpushare` works in a new shell that has only the
// host tools and the demo's exports (no kubectl of the machine's, no plugin on PATH).
func (u *user) inspectInNewShell(t *testing.T) {
	out := u.shell(t, "command -v kubectl\nkubectl inspect gpushare\n")
	if !regexp.MustCompile(`(?m)\s12/14\s`).MatchString(out) {
		t.Errorf("kubectl inspect gpushare shows no node with 12/14 GiB allocated:\n%s", out)
	}
}

// needsLine is the header line each example states its prerequisites in.
var needsLine = regexp.MustCompile(`(?m)^# Needs: (.+)$`)

// prerequisites maps what an example's `# Needs:` line may say to how the test meets it,
// in the order they are met. A new prerequisite needs a line here.
var prerequisites = []struct {
	needs string
	meet  func(u *user, t *testing.T)
}{
	{"nothing", nil},
	{"the three notebooks of deploy/examples/tf-notebook.yaml Running", nil}, // make demo ran them
	{"Kueue's CRDs, and namespace team-a (deploy/examples/quota-gpu-mem.yaml creates it)", (*user).installKueueCRDs},
}

// applyExamples: every manifest under deploy/examples, applied with the user's kubectl in
// a new shell (`kubectl apply -f FILE`) once what its `# Needs:` line names is met; an
// example without the line, or naming something the test cannot meet, fails.
func (u *user) applyExamples(t *testing.T) {
	t.Cleanup(func() { u.removeKueue(t) })
	byNeed := map[string][]string{}
	err := filepath.WalkDir(filepath.Join(u.repo, "deploy", "examples"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(u.repo, path)
		m := needsLine.FindSubmatch(b)
		if m == nil {
			t.Errorf("%s: no `# Needs: ...` line saying what must exist before it is applied", rel)
			return nil
		}
		byNeed[string(m[1])] = append(byNeed[string(m[1])], rel)
		return nil
	})
	if err != nil {
		t.Fatalf("reading deploy/examples: %v", err)
	}
	applied := 0
	for _, p := range prerequisites {
		files := byNeed[p.needs]
		delete(byNeed, p.needs)
		if len(files) == 0 {
			continue
		}
		if p.meet != nil {
			p.meet(u, t)
		}
		sort.Strings(files)
		var script strings.Builder
		for _, f := range files {
			fmt.Fprintf(&script, "kubectl apply -f %s\n", filepath.Join(u.repo, f))
		}
		t.Logf("needs %s: %v", p.needs, files)
		u.shell(t, script.String())
		applied += len(files)
	}
	for needs, files := range byNeed {
		t.Errorf("%v: `# Needs: %s` is not something the test knows how to meet (test/demo prerequisites)", files, needs)
	}
	if applied < 4 {
		t.Errorf("applied %d manifests of deploy/examples, want every one (at least 4)", applied)
	}
}

// kueueCRDs are the Kueue CRDs the recipe's objects need (from hack/tools.sh kueue-crds).
var kueueCRDs = []string{"kueue.x-k8s.io_resourceflavors.yaml", "kueue.x-k8s.io_clusterqueues.yaml", "kueue.x-k8s.io_localqueues.yaml"}

// installKueueCRDs installs the Kueue CRDs the recipe needs, at the version hack/tools.sh
// pins, and waits until they are served.
func (u *user) installKueueCRDs(t *testing.T) {
	t.Helper()
	dir := u.kueueCRDDir(t)
	var script strings.Builder
	for _, f := range kueueCRDs {
		fmt.Fprintf(&script, "kubectl apply --server-side -f %s\n", filepath.Join(dir, f))
	}
	for _, f := range kueueCRDs {
		fmt.Fprintf(&script, "kubectl wait --for=condition=Established --timeout=60s crd/%s\n", crdName(f))
	}
	u.shell(t, script.String())
}

// removeKueue deletes the recipe's objects and the CRDs, leaving the demo cluster as the
// demo made it.
func (u *user) removeKueue(t *testing.T) {
	t.Helper()
	// Without the CRDs (the install failed) nothing of the recipe was applied.
	script := fmt.Sprintf("kubectl delete --ignore-not-found -f %s || true\n", filepath.Join(u.repo, "deploy", "examples", "kueue"))
	for _, f := range kueueCRDs {
		script += fmt.Sprintf("kubectl delete --ignore-not-found crd/%s\n", crdName(f))
	}
	u.shell(t, script)
}

func (u *user) kueueCRDDir(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(u.repo, "hack", "tools.sh"), "kueue-crds")
	cmd.Env = u.env()
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/tools.sh kueue-crds: %v", err)
	}
	s := bufio.NewScanner(bytes.NewReader(out))
	dir := ""
	for s.Scan() {
		dir = s.Text()
	}
	return dir
}

// crdName turns kueue.x-k8s.io_localqueues.yaml into localqueues.kueue.x-k8s.io.
func crdName(file string) string {
	group, plural, _ := strings.Cut(strings.TrimSuffix(file, ".yaml"), "_")
	return plural + "." + group
}
