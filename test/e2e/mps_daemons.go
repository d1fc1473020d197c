//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/mps"
)

// buildFakeControl builds test/e2e/fakempscontrol, the stand-in for nvidia-cuda-mps-control on
// simulated cards, into a folder of the test's.
func buildFakeControl(t *testing.T, e *Env) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fakempscontrol")
	cmd := exec.Command("go", "build", "-o", bin, "./test/e2e/fakempscontrol")
	cmd.Dir = e.Repo()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the fake MPS control daemon: %v\n%s", err, out)
	}
	return bin
}

// mpsMetricsAddress is where the e2e's gpushare-mps serves /metrics and /healthz.
const mpsMetricsAddress = "127.0.0.1:19402"

// startMPSLauncher runs gpushare-mps on the host, as deploy/mps runs it on a GPU node, over a
// fresh MPS root (short: the daemons' sockets must fit in sun_path), with the fake control
// daemon and a 1 MiB shm tmpfs per daemon, until the test ends; then it stops it (which stops
// its daemons), unmounts the shm of daemons still wanted and removes the root. It returns the root and the
// fake control program (its client mode queries a daemon).
func startMPSLauncher(t *testing.T, e *Env) (root, fake string) {
	t.Helper()
	requireBinary(t, e, "gpushare-mps")
	fake = buildFakeControl(t, e)
	root, err := os.MkdirTemp("/run", "gpushare-e2e-mps-")
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(e.cfg.state, "logs", "gpushare-mps-"+filepath.Base(root)+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(e.Bin("gpushare-mps"), "--root="+root, "--control="+fake, "--shm-size=1Mi", "--interval=100ms", "--retry-after=1s", "--stop-timeout=5s", "--metrics-address="+mpsMetricsAddress)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting gpushare-mps: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done); logf.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Errorf("gpushare-mps did not stop within 30s of SIGTERM (log: %s)", logf.Name())
			<-done
		}
		// Daemons still wanted keep their shm across a gpushare-mps restart (their clients use
		// it); this test's root is wanted by nobody after it, so its mounts go here.
		for _, p := range shmMountsUnder(root) {
			if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
				t.Errorf("unmounting %s: %v", p, err)
			}
		}
		_ = os.RemoveAll(root)
	})
	return root, fake
}

// shmMountsUnder lists the mount points under root (from /proc/self/mountinfo).
func shmMountsUnder(root string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && strings.HasPrefix(f[4], root+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

// mpsFolder is the daemon folder of cap mib MiB (every SM) on card under root.
func mpsFolder(t *testing.T, root, card string, mib int64) mps.Folder {
	t.Helper()
	f, err := mps.FolderOf(root, card, mps.Cap{PinnedMemMiB: mib, ActiveThreadPct: 100})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// mpsReady reads f's ready file (nil when absent).
func mpsReady(f mps.Folder) *mps.Ready {
	b, err := os.ReadFile(filepath.Join(f.Dir, mps.ReadyFile))
	if err != nil {
		return nil
	}
	var r mps.Ready
	if json.Unmarshal(b, &r) != nil {
		return nil
	}
	return &r
}

// CaseMPSDaemons: on an MPS node share-plugin hands each container the MPS daemon of its grant,
// and gpushare-mps runs one daemon per card and distinct grant with the cap set on the server
// side. Three pods on one simulated T4 — 4, 4 and 2 GiB — get two daemons: the two 4 GiB
// containers the same one (its pipe folder in both), the 2 GiB container its own; each daemon
// was given set_default_device_pinned_mem_limit with its grant and answers it, serves its
// card alone, and has its own shm tmpfs as /dev/shm. When the 2 GiB pod ends, its daemon is
// stopped and its folder removed once --mps-release-grace has passed; the 4 GiB daemon stays
// while one of its pods runs. The control daemon is a stand-in (test/e2e/fakempscontrol): the
// caps' effect on CUDA needs a GPU (hack/gpu-acceptance.sh).
func CaseMPSDaemons(t *testing.T, e *Env) {
	requireRealNode(t, e)
	requireBinary(t, e, "extender", "share-plugin")
	ctx := testContext(t, 5*time.Minute)
	root, fake := startMPSLauncher(t, e)
	inv := restartSharePlugin(ctx, t, e, "t4:1", "GPUSHARE_MPS_ROOT="+root, "GPUSHARE_MPS_RELEASE_GRACE=2s")
	labelNode(ctx, t, e, e.RealNode, string(gpushare.IsolationMPS))
	t.Cleanup(func() { labelNode(context.Background(), t, e, e.RealNode, "") })
	card := inv.Devices[0].UUID

	ns := newNamespace(t, e)
	for _, p := range []struct {
		name  string
		units int64
	}{{"a", 4}, {"b", 4}, {"c", 2}} {
		createPod(t, e, gpuPod(ns, p.name, e.RealNode, ctr{units: p.units}))
	}
	f4, f2 := mpsFolder(t, root, card, 4096), mpsFolder(t, root, card, 2048)
	for name, f := range map[string]mps.Folder{"a": f4, "b": f4, "c": f2} {
		waitPod(t, e, ns, name, 2*time.Minute, "Running", isRunning)
		logs := podLogs(t, e, ns, name)
		if want := gpushare.EnvMPSPipeDirectory + "=" + f.Pipe() + "\n"; !strings.Contains(logs, want) {
			t.Errorf("pod %s lacks %s:\n%s", name, strings.TrimSpace(want), logs)
		}
	}
	entries, _, err := mps.Scan(root)
	if err != nil || len(entries) != 2 {
		t.Fatalf("MPS root holds %d daemon folders (%v), want 2 (4096 MiB shared by a and b, 2048 MiB for c): %+v", len(entries), err, entries)
	}
	for _, f := range []mps.Folder{f4, f2} {
		checkMPSDaemon(t, f, card, fake)
	}
	if m := scrape(t, "http://"+mpsMetricsAddress+"/metrics"); !strings.Contains(m, `gpushare_mps_daemons{uuid="`+card+`"} 2`) {
		t.Errorf("gpushare-mps's /metrics does not count 2 daemons on the card:\n%s", grepLines(m, "gpushare_mps_"))
	}

	r2 := mpsReady(f2)
	deletePod(t, e, ns, "c")
	waitFor(ctx, t, time.Minute, "the 2048 MiB daemon to be stopped and its folder removed", func() bool {
		_, err := os.Stat(f2.Dir)
		return os.IsNotExist(err)
	})
	if r2 != nil && !exited(r2.Pid, 10*time.Second) {
		t.Errorf("the released daemon (pid %d) still runs", r2.Pid)
	}
	deletePod(t, e, ns, "a")
	// b still holds the 4096 MiB daemon: it must outlive a release round (the grace is 2 s).
	time.Sleep(5 * time.Second)
	if mpsReady(f4) == nil {
		t.Errorf("the 4096 MiB daemon was stopped while pod b holds it")
	}
}

// checkMPSDaemon checks f's daemon as its clients would find it: ready with f's cap, the cap
// (pinned memory and active thread percentage) set through the control daemon (its log, and its answer now), the card alone, and a shm
// tmpfs of its own as its /dev/shm.
func checkMPSDaemon(t *testing.T, f mps.Folder, card, fake string) {
	t.Helper()
	r := mpsReady(f)
	if r == nil || r.Cap != f.Cap {
		t.Errorf("%s: ready %+v, want cap %+v", f.Key(), r, f.Cap)
		return
	}
	log, _ := os.ReadFile(filepath.Join(f.Log(), "control.log"))
	for _, want := range []string{"Startup: card " + card, "Command: set_default_device_pinned_mem_limit 0 " + f.Cap.MemLimitArg(), "Command: set_default_active_thread_percentage " + strconv.Itoa(f.Cap.ActiveThreadPct)} {
		if !strings.Contains(string(log), want) {
			t.Errorf("%s: control.log lacks %q:\n%s", f.Key(), want, log)
		}
	}
	got, err := mps.ExecControl{Binary: fake}.Send(context.Background(), f, "get_default_device_pinned_mem_limit 0")
	if err != nil || got != f.Cap.MemLimitArg() {
		t.Errorf("%s: the daemon's pinned memory limit is %q (%v), want %s", f.Key(), got, err, f.Cap.MemLimitArg())
	}
	if _, err := os.Stat(filepath.Join(f.Shm(), "fakempscontrol")); err != nil {
		t.Errorf("%s: the daemon's /dev/shm is not its folder's shm: %v", f.Key(), err)
	}
	if m := shmMountsUnder(f.Dir); len(m) != 1 || m[0] != f.Shm() {
		t.Errorf("%s: mounts under the folder %v, want its shm tmpfs alone", f.Key(), m)
	}
}
