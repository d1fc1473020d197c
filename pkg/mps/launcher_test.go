package mps

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

const card0 = "GPU-0123abcd-0000-1111-2222-333344445555"

// fakeControl records the commands sent to each daemon; startErr fails every Start.
type fakeControl struct {
	mu       sync.Mutex
	sent     map[Key][]string
	procs    map[Key]*fakeProcess
	startErr error
	pid      int
}

type fakeProcess struct {
	pid  int
	done chan struct{}
	once sync.Once
}

func (p *fakeProcess) Pid() int              { return p.pid }
func (p *fakeProcess) Done() <-chan struct{} { return p.done }
func (p *fakeProcess) Kill() error           { p.exit(); return nil }
func (p *fakeProcess) exit()                 { p.once.Do(func() { close(p.done) }) }

func newFakeControl() *fakeControl {
	return &fakeControl{sent: map[Key][]string{}, procs: map[Key]*fakeProcess{}, pid: 100}
}

func (c *fakeControl) Start(_ context.Context, f Folder) (Process, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.startErr != nil {
		return nil, c.startErr
	}
	c.pid++
	p := &fakeProcess{pid: c.pid, done: make(chan struct{})}
	c.procs[f.Key()] = p
	return p, nil
}

func (c *fakeControl) Send(_ context.Context, f Folder, cmd string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent[f.Key()] = append(c.sent[f.Key()], cmd)
	if cmd == "quit" {
		if p := c.procs[f.Key()]; p != nil {
			p.exit()
		}
	}
	return "", nil
}

func (c *fakeControl) commands(k Key) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sent[k])
}

type noShm struct{}

func (noShm) mount(string, int64) error { return nil }
func (noShm) unmount(string) error      { return nil }

func testLauncher(t *testing.T, ctl Control) (*Launcher, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	l, err := NewLauncher(Config{Root: t.TempDir(), ReadyTimeout: time.Second, Interval: time.Second,
		RetryAfter: 10 * time.Second, StopTimeout: time.Second}, ctl, clk)
	if err != nil {
		t.Fatal(err)
	}
	l.shm = noShm{}
	return l, clk
}

func mustFolder(t *testing.T, root string, mem int64, pct int) Folder {
	t.Helper()
	f, err := FolderOf(root, card0, Cap{PinnedMemMiB: mem, ActiveThreadPct: pct})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestLauncherLifecycle: a want starts one daemon with the cap set on the server side, a
// second cap on the same card a second daemon, a released want stops its daemon and removes
// its folder, a daemon that exits is started again.
func TestLauncherLifecycle(t *testing.T) {
	ctx := context.Background()
	ctl := newFakeControl()
	l, clk := testLauncher(t, ctl)
	f4 := mustFolder(t, l.cfg.Root, 4096, 100)
	f2 := mustFolder(t, l.cfg.Root, 2048, 25)
	for _, f := range []Folder{f4, f2} {
		if err := Request(f, clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	l.Reconcile(ctx)

	want4 := []string{"get_server_list", "set_default_device_pinned_mem_limit 0 4096M", "set_default_active_thread_percentage 100"}
	if got := ctl.commands(f4.Key()); !slices.Equal(got, want4) {
		t.Errorf("commands to %s = %q, want %q", f4.Key(), got, want4)
	}
	if got := ctl.commands(f2.Key()); !slices.Contains(got, "set_default_device_pinned_mem_limit 0 2048M") || !slices.Contains(got, "set_default_active_thread_percentage 25") {
		t.Errorf("commands to %s = %q, want its cap", f2.Key(), got)
	}
	for _, f := range []Folder{f4, f2} {
		r, err := AwaitReady(ctx, f, time.Millisecond, clk.Now)
		if err != nil || r.Cap != f.Cap {
			t.Fatalf("AwaitReady(%s) = %v, %v", f.Key(), r, err)
		}
	}
	if n := len(l.Daemons()); n != 2 {
		t.Fatalf("%d daemons, want 2", n)
	}

	if err := Release(f2); err != nil {
		t.Fatal(err)
	}
	l.Reconcile(ctx)
	if got := ctl.commands(f2.Key()); got[len(got)-1] != "quit" {
		t.Errorf("last command to the released daemon = %q, want quit", got[len(got)-1])
	}
	if _, err := os.Stat(f2.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("released daemon's folder: %v, want it removed", err)
	}
	if _, err := os.Stat(filepath.Join(f4.Dir, ReadyFile)); err != nil {
		t.Errorf("the other daemon's ready file: %v", err)
	}

	ctl.procs[f4.Key()].exit()
	l.Reconcile(ctx)
	if n := strings.Count(strings.Join(ctl.commands(f4.Key()), "\n"), "set_default_device_pinned_mem_limit"); n != 2 {
		t.Errorf("the exited daemon's cap was set %d times, want 2 (started again)", n)
	}
	if _, err := os.Stat(filepath.Join(f4.Dir, ReadyFile)); err != nil {
		t.Errorf("restarted daemon's ready file: %v", err)
	}
}

// TestLauncherStartFailure: a daemon that cannot start leaves its reason where AwaitReady
// quotes it, and is tried again only after RetryAfter.
func TestLauncherStartFailure(t *testing.T) {
	ctx := context.Background()
	ctl := newFakeControl()
	ctl.startErr = errors.New("exec: nvidia-cuda-mps-control: not found")
	l, clk := testLauncher(t, ctl)
	f := mustFolder(t, l.cfg.Root, 4096, 100)
	if err := Request(f, clk.Now()); err != nil {
		t.Fatal(err)
	}
	l.Reconcile(ctx)
	actx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := AwaitReady(actx, f, time.Millisecond, clk.Now); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("AwaitReady = %v, want the start failure quoted", err)
	}
	ctl.startErr = nil
	l.Reconcile(ctx)
	if len(l.Daemons()) != 0 {
		t.Errorf("retried before RetryAfter")
	}
	clk.Step(11 * time.Second)
	l.Reconcile(ctx)
	if len(l.Daemons()) != 1 {
		t.Errorf("not retried after RetryAfter")
	}
	if _, err := os.Stat(filepath.Join(f.Dir, FailedFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("failed file after a successful start: %v", err)
	}
}

// TestLauncherIgnoresOddFolders: folders that are not <UUID>/<cap> and wants that do not match
// their folder start nothing.
func TestLauncherIgnoresOddFolders(t *testing.T) {
	ctl := newFakeControl()
	l, _ := testLauncher(t, ctl)
	for _, d := range []string{"not-a-card/m1-t1", card0 + "/m1-t1000", card0 + "/etc"} {
		if err := os.MkdirAll(filepath.Join(l.cfg.Root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(l.cfg.Root, d, WantFile), []byte(`{}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := mustFolder(t, l.cfg.Root, 1024, 100)
	if err := os.MkdirAll(f.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.Dir, WantFile), []byte(`{"card":"`+card0+`","cap":{"pinnedMemMiB":99999,"activeThreadPct":100}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	l.Reconcile(context.Background())
	if n := len(l.Daemons()); n != 0 {
		t.Errorf("%d daemons started from odd folders, want 0", n)
	}
}

// TestLauncherHandler: /metrics counts the daemons per card and the starts by result;
// /healthz fails once the root has not been read for three intervals.
func TestLauncherHandler(t *testing.T) {
	ctl := newFakeControl()
	l, clk := testLauncher(t, ctl)
	for _, mib := range []int64{4096, 2048} {
		if err := Request(mustFolder(t, l.cfg.Root, mib, 100), clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	l.Reconcile(context.Background())
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		l.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	_, body := get("/metrics")
	for _, want := range []string{`gpushare_mps_daemons{uuid="` + card0 + `"} 2`, `gpushare_mps_daemon_starts_total{result="ready"} 2`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d just after a scan, want 200", code)
	}
	clk.Step(11 * time.Second)
	if code, _ := get("/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz = %d 11 s after the last scan, want 503", code)
	}
}
