//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// CaseSharePluginRefusesUnitChange: a pod placed with a GiB record runs on a node; a
// share-plugin started for that node with --memory-unit=MiB must refuse to start, naming the
// pod and saying to drain the node first, and leave the node's inventory in GiB. The node is
// a kwok one and the share-plugin a one-off process: the refusal comes before it serves
// anything, so the cluster's own share-plugin is left alone.
func CaseSharePluginRefusesUnitChange(t *testing.T, e *Env) {
	requireBinary(t, e, "share-plugin")
	ctx := testContext(t, 2*time.Minute)
	ns := newNamespace(t, e)
	node := newKwokNode(t, e, "unitchange", t4)
	createPod(t, e, placedPod(ns, "recorded", node, 0, 4))
	waitPod(t, e, ns, "recorded", time.Minute, "Running", isRunning)

	dir := t.TempDir()
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, e.Bin("share-plugin"),
		"--kubeconfig", e.Kubeconfig, "--node-name", node, "--memory-unit", "MiB",
		"--simulate", "t4", "--device-list-strategy", "envvar", "--metrics-address", "",
		"--device-plugin-dir", filepath.Join(dir, "device-plugins"), "--pod-resources-socket", "",
		"--cdi-spec-dir", filepath.Join(dir, "cdi"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("share-plugin --memory-unit=MiB on %s: %v\n%s", node, err, out.String())
	if _, exited := err.(*exec.ExitError); !exited || cctx.Err() != nil {
		t.Fatalf("share-plugin with another unit under a recorded pod: %v, want it to exit with an error at once", err)
	}
	for _, want := range []string{"--memory-unit=MiB", ns + "/recorded", "in GiB", "drain the node first"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("share-plugin's refusal does not say %q", want)
		}
	}
	n, err := e.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inv, _, err := res.NodeInventory(n)
	if err != nil || inv.Unit.MiB != gpushare.GiB.MiB {
		t.Errorf("node %s's inventory after the refusal: unit %v, err %v; want GiB, untouched", node, inv.Unit, err)
	}
}
