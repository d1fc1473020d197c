package mps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// TestMain lets the test binary stand in for gpushare-mps's exec-daemon subcommand.
func TestMain(m *testing.M) {
	if len(os.Args) > 3 && os.Args[1] == ExecDaemonCommand && os.Args[3] == "--" {
		err := ExecDaemon(os.Args[2], os.Args[4:])
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// TestExecControl runs the launcher through ExecControl against test/e2e/fakempscontrol, a
// stand-in for nvidia-cuda-mps-control, as root does on a node: the daemon in a mount namespace
// of its own with the folder's shm tmpfs as its /dev/shm, its cap set and read back through
// the client mode, stopped and its folder (and tmpfs) gone once released. Needs root (mount
// namespaces, tmpfs), which `make test` has.
func TestExecControl(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mount namespaces and tmpfs")
	}
	bin := filepath.Join(t.TempDir(), "fakempscontrol")
	if out, err := exec.Command("go", "build", "-o", bin, "../../test/e2e/fakempscontrol").CombinedOutput(); err != nil {
		t.Fatalf("building the fake control daemon: %v\n%s", err, out)
	}
	// Short: the daemon's socket path must fit in sun_path (108 bytes).
	root, err := os.MkdirTemp("", "mps")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctl := ExecControl{Binary: bin, Self: self}
	l, err := NewLauncher(Config{Root: root, ShmSize: 1 << 20, ReadyTimeout: 10 * time.Second, Interval: time.Second,
		RetryAfter: time.Second, StopTimeout: 5 * time.Second}, ctl, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f := mustFolder(t, root, 4096, 50)
	if err := Request(f, time.Now()); err != nil {
		t.Fatal(err)
	}
	l.Reconcile(ctx)
	t.Cleanup(l.stopAll)
	if _, err := AwaitReady(ctx, f, 10*time.Millisecond, time.Now); err != nil {
		t.Fatal(err)
	}
	for cmd, want := range map[string]string{"get_default_device_pinned_mem_limit 0": "4096M", "get_default_active_thread_percentage": "50.0"} {
		if got, err := ctl.Send(ctx, f, cmd); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", cmd, got, err, want)
		}
	}
	if !mounted(f.Shm()) {
		t.Errorf("%s is not a mount point, want the daemon's tmpfs", f.Shm())
	}
	if _, err := os.Stat(filepath.Join(f.Shm(), "fakempscontrol")); err != nil {
		t.Errorf("the daemon's /dev/shm is not the folder's shm: %v", err)
	}
	if _, err := os.Stat("/dev/shm/fakempscontrol"); err == nil {
		t.Errorf("the daemon wrote to the host's /dev/shm")
	}
	if _, err := ctl.Send(ctx, f, "no_such_command"); err == nil {
		t.Errorf("an unknown command was not refused")
	}

	if err := Release(f); err != nil {
		t.Fatal(err)
	}
	l.Reconcile(ctx)
	if _, err := os.Stat(f.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("released daemon's folder: %v, want it removed", err)
	}
	if len(l.Daemons()) != 0 {
		t.Errorf("daemons left: %v", l.Daemons())
	}
}
