//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// verifyRow is the real node's row of `kubectl inspect gpushare --verify`'s table on
// simulated cards: the granted container saw one card and its sibling none (CARDS 1/0), the
// memory cannot be measured without a driver, so the verdict is cannot verify.
var verifyRow = regexp.MustCompile(`\s1/0\s+cannot verify\s+cannot verify\s*$`)

// CaseVerifyIsolation: `kubectl inspect gpushare --verify NODE` on the real node with
// simulated cards. The share-plugin image (make image, imported into containerd) runs
// gpushare-probe in a pod the scheduler places with one gpu-mem unit, beside a sibling
// container with none: the card and environment checks give real verdicts (the granted
// container sees its card, the sibling none), the memory check cannot verify (no libcuda),
// the exit status is 2, and the probe pods are deleted.
func CaseVerifyIsolation(t *testing.T, e *Env) {
	requireRealNode(t, e)
	requireBinary(t, e, "extender", "gpushare-scheduler", "share-plugin", "kubectl-inspect-gpushare")
	ctx := testContext(t, 10*time.Minute)
	if _, err := e.cfg.script(ctx, "build-component-images.sh"); err != nil {
		t.Fatalf("make image: %v", err)
	}
	if _, err := e.cfg.script(ctx, "load-images.sh"); err != nil {
		t.Fatalf("loading the images into containerd: %v", err)
	}
	version, err := os.ReadFile(filepath.Join(e.Repo(), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	ns := newNamespace(t, e)
	out, code := kubectlPluginStatus(ctx, t, e, "inspect", "gpushare", "--verify", "-n", ns,
		"--probe-image", "gpushare/share-plugin:"+strings.TrimSpace(string(version)), "--verify-timeout", "3m", e.RealNode)
	if code != 2 {
		t.Errorf("exit status %d, want 2 (cannot verify: simulated cards have no driver):\n%s", code, out)
	}
	var row string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == e.RealNode {
			row = l
			break
		}
	}
	if !verifyRow.MatchString(row) {
		t.Errorf("row of %s %q does not match %s:\n%s", e.RealNode, row, verifyRow, out)
	}
	if strings.Contains(out, "NOT enforced") {
		t.Errorf("a check is NOT enforced on simulated cards:\n%s", out)
	}
	if !strings.Contains(out, "granted memory: cannot verify") {
		t.Errorf("no note says the memory cannot be verified:\n%s", out)
	}
	pods, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: gpushare.LabelVerifyRun})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		t.Errorf("probe pod %s left behind (phase %s)", p.Name, p.Status.Phase)
	}
}

// kubectlPluginStatus is kubectlPlugin for a command whose exit status is part of the
// answer: the output and the status (-1 when it did not run).
func kubectlPluginStatus(ctx context.Context, t *testing.T, e *Env, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(e.cfg.k8sBin, "kubectl"), args...)
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+e.Kubeconfig,
		"PATH="+filepath.Join(e.Repo(), "bin")+":"+e.cfg.k8sBin+":"+os.Getenv("PATH"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err == nil {
		return out.String(), 0
	}
	if x, ok := err.(*exec.ExitError); ok {
		return out.String(), x.ExitCode()
	}
	return out.String() + "\n" + err.Error(), -1
}
