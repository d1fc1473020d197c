package mps

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Config is gpushare-mps's.
type Config struct {
	// Root is the MPS root (the package documentation's <root>).
	Root string
	// ShmSize is the size in bytes of each daemon's shm tmpfs; 0 leaves shm a plain folder
	// (then bounded only by the file system it is on).
	ShmSize int64
	// ReadyTimeout bounds how long a new daemon may take to answer.
	ReadyTimeout time.Duration
	// Interval is how often the root is scanned for wants.
	Interval time.Duration
	// RetryAfter is how long a daemon that failed to start waits before the next try.
	RetryAfter time.Duration
	// StopTimeout bounds how long a daemon told to quit may take before it is killed.
	StopTimeout time.Duration
}

// Validate checks c. Errors name the field.
func (c Config) Validate() error {
	switch {
	case c.Root == "":
		return errors.New("MPS launcher: no root")
	case c.ShmSize < 0:
		return fmt.Errorf("MPS launcher: shm size %d", c.ShmSize)
	case c.ReadyTimeout <= 0, c.Interval <= 0, c.RetryAfter <= 0, c.StopTimeout <= 0:
		return fmt.Errorf("MPS launcher: ready timeout, interval, retry and stop timeout must be positive (%s, %s, %s, %s)",
			c.ReadyTimeout, c.Interval, c.RetryAfter, c.StopTimeout)
	}
	return nil
}

// Launcher runs the daemons an MPS root's want files ask for and stops those no longer wanted
// (gpushare-mps).
type Launcher struct {
	cfg   Config
	ctl   Control
	clock clock.WithTicker
	shm   shmMounter

	mu      sync.Mutex // guards daemons and scanned, for Daemons and Handler
	daemons map[Key]*daemon
	scanned time.Time         // when Reconcile last read the root
	failed  map[Key]time.Time // when a start last failed
	metrics launcherMetrics
}

// daemon is one running control daemon.
type daemon struct {
	f     Folder
	proc  Process
	ready Ready
}

// NewLauncher is a launcher of cfg's daemons through ctl. Errors: Config.Validate's.
func NewLauncher(cfg Config, ctl Control, clk clock.WithTicker) (*Launcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Launcher{cfg: cfg, ctl: ctl, clock: clk, shm: tmpfsMounter{}, daemons: map[Key]*daemon{}, failed: map[Key]time.Time{},
		metrics: newLauncherMetrics()}, nil
}

// Run reconciles every Interval until ctx ends, then stops every daemon it runs and removes
// their ready files (their wants stay: a restarted launcher starts them again).
func (l *Launcher) Run(ctx context.Context) {
	klog.InfoS("MPS launcher started", "root", l.cfg.Root, "shmBytes", l.cfg.ShmSize)
	t := l.clock.NewTicker(l.cfg.Interval)
	defer t.Stop()
	for {
		l.Reconcile(ctx)
		select {
		case <-ctx.Done():
			l.stopAll()
			return
		case <-t.C():
		}
	}
}

// Daemons returns the keys of the running daemons with their ready records.
func (l *Launcher) Daemons() map[Key]Ready {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[Key]Ready, len(l.daemons))
	for k, d := range l.daemons {
		out[k] = d.ready
	}
	return out
}

// Reconcile makes the running daemons those the root's want files ask for: it forgets daemons
// that exited (their ready file removed), stops those no longer wanted, removes the folders of
// neither, and starts those missing (a failed start is retried after RetryAfter).
func (l *Launcher) Reconcile(ctx context.Context) {
	entries, problems, err := Scan(l.cfg.Root)
	if err != nil {
		klog.ErrorS(err, "Cannot scan the MPS root; daemons left as they are")
		return
	}
	for _, p := range problems {
		klog.ErrorS(p, "Ignoring an MPS folder")
	}
	l.mu.Lock()
	l.scanned = l.clock.Now()
	l.mu.Unlock()
	l.reapExited()
	wanted := map[Key]Folder{}
	for _, e := range entries {
		if e.Want != nil {
			wanted[e.Folder.Key()] = e.Folder
		}
	}
	for k, d := range l.snapshot() {
		if _, ok := wanted[k]; !ok {
			l.stop(ctx, d, "no longer wanted")
		}
	}
	for _, e := range entries {
		k := e.Folder.Key()
		if _, ok := wanted[k]; !ok && !l.running(k) {
			l.remove(e.Folder)
		}
	}
	for k, f := range wanted {
		if l.running(k) || ctx.Err() != nil {
			continue
		}
		if at, ok := l.failed[k]; ok && l.clock.Since(at) < l.cfg.RetryAfter {
			continue
		}
		l.start(ctx, f)
	}
}

func (l *Launcher) lastScan() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.scanned
}

func (l *Launcher) snapshot() map[Key]*daemon {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[Key]*daemon, len(l.daemons))
	for k, d := range l.daemons {
		out[k] = d
	}
	return out
}

func (l *Launcher) running(k Key) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.daemons[k]
	return ok
}

// reapExited forgets daemons whose process ended: new clients must not find a ready file for
// a daemon that is gone (they would run without MPS, uncapped).
func (l *Launcher) reapExited() {
	for k, d := range l.snapshot() {
		select {
		case <-d.proc.Done():
			removeFile(d.f.file(ReadyFile))
			l.mu.Lock()
			delete(l.daemons, k)
			l.mu.Unlock()
			l.metrics.exits.Inc()
			klog.ErrorS(nil, "MPS control daemon exited; starting it again if still wanted", "daemon", k, "pid", d.proc.Pid())
		default:
		}
	}
}

func (l *Launcher) stopAll() {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.StopTimeout+5*time.Second)
	defer cancel()
	for _, d := range l.snapshot() {
		l.stop(ctx, d, "gpushare-mps is stopping")
	}
}
