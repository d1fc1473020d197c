package mps

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/klog/v2"
)

// start starts f's daemon: folders, shm, the daemon, and once it answers its caps; then the
// ready file. On any failure the daemon is stopped, the reason left in the failed file.
func (l *Launcher) start(ctx context.Context, f Folder) {
	removeFile(f.file(ReadyFile))
	proc, ready, err := l.launch(ctx, f)
	if err != nil {
		l.metrics.starts.WithLabelValues("failed").Inc()
		l.failed[f.Key()] = l.clock.Now()
		if werr := os.WriteFile(f.file(FailedFile), []byte(err.Error()+"\n"), 0o644); werr != nil {
			klog.ErrorS(werr, "Cannot record why an MPS daemon failed", "daemon", f.Key())
		}
		klog.ErrorS(err, "MPS control daemon not started", "daemon", f.Key(), "retryAfter", l.cfg.RetryAfter)
		if proc != nil {
			l.halt(ctx, f, proc)
		}
		return
	}
	delete(l.failed, f.Key())
	removeFile(f.file(FailedFile))
	if err := writeJSON(f.file(ReadyFile), ready); err != nil {
		klog.ErrorS(err, "MPS control daemon started but cannot say so; stopping it", "daemon", f.Key())
		l.halt(ctx, f, proc)
		return
	}
	l.mu.Lock()
	l.daemons[f.Key()] = &daemon{f: f, proc: proc, ready: ready}
	l.mu.Unlock()
	l.metrics.starts.WithLabelValues("ready").Inc()
	klog.InfoS("MPS control daemon ready", "daemon", f.Key(), "pid", proc.Pid(),
		"pinnedMemMiB", f.Cap.PinnedMemMiB, "activeThreadPct", f.Cap.ActiveThreadPct)
}

// launch starts f's daemon and sets its caps; the process is returned when it started, even
// with an error.
func (l *Launcher) launch(ctx context.Context, f Folder) (Process, Ready, error) {
	for _, d := range []string{f.Pipe(), f.Log(), f.Shm()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, Ready{}, fmt.Errorf("creating %s: %w", d, err)
		}
	}
	// MPS needs its /dev/shm writable by every client, whatever its uid.
	if err := os.Chmod(f.Shm(), 0o1777); err != nil {
		return nil, Ready{}, fmt.Errorf("opening %s to clients: %w", f.Shm(), err)
	}
	if l.cfg.ShmSize > 0 {
		if err := l.shm.mount(f.Shm(), l.cfg.ShmSize); err != nil {
			return nil, Ready{}, err
		}
	}
	proc, err := l.ctl.Start(ctx, f)
	if err != nil {
		return nil, Ready{}, err
	}
	if err := l.awaitAnswer(ctx, f, proc); err != nil {
		return proc, Ready{}, err
	}
	cmds := []string{
		"set_default_device_pinned_mem_limit 0 " + f.Cap.MemLimitArg(),
		"set_default_active_thread_percentage " + strconv.Itoa(f.Cap.ActiveThreadPct),
	}
	for _, c := range cmds {
		if _, err := l.ctl.Send(ctx, f, c); err != nil {
			return proc, Ready{}, fmt.Errorf("setting the cap: %w", err)
		}
	}
	return proc, Ready{Pid: proc.Pid(), Cap: f.Cap, Since: l.clock.Now().UTC()}, nil
}

// awaitAnswer waits until f's daemon answers get_server_list, within ReadyTimeout.
func (l *Launcher) awaitAnswer(ctx context.Context, f Folder, proc Process) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.ReadyTimeout)
	defer cancel()
	var last error
	for {
		select {
		case <-proc.Done():
			return fmt.Errorf("the control daemon exited at start (see %s)", filepath.Join(f.Log(), "control.log"))
		default:
		}
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		_, last = l.ctl.Send(cctx, f, "get_server_list")
		ccancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the control daemon did not answer within %s: %w", l.cfg.ReadyTimeout, last)
		case <-l.clock.After(100 * time.Millisecond):
		}
	}
}

// stop tells d to quit (its servers end with it, and with them its clients' MPS contexts),
// kills it after StopTimeout, and removes its folder unless it is wanted again.
func (l *Launcher) stop(ctx context.Context, d *daemon, why string) {
	k := d.f.Key()
	removeFile(d.f.file(ReadyFile))
	l.halt(ctx, d.f, d.proc)
	l.mu.Lock()
	delete(l.daemons, k)
	l.mu.Unlock()
	klog.InfoS("MPS control daemon stopped", "daemon", k, "pid", d.proc.Pid(), "why", why)
	if _, err := os.Stat(d.f.file(WantFile)); errors.Is(err, fs.ErrNotExist) {
		l.remove(d.f)
	}
}

// halt ends proc: quit, then SIGKILL after StopTimeout.
func (l *Launcher) halt(ctx context.Context, f Folder, proc Process) {
	qctx, cancel := context.WithTimeout(ctx, l.cfg.StopTimeout)
	defer cancel()
	if _, err := l.ctl.Send(qctx, f, "quit"); err != nil {
		klog.V(2).InfoS("MPS control daemon did not take quit", "daemon", f.Key(), "err", err)
	}
	select {
	case <-proc.Done():
		return
	case <-qctx.Done():
	}
	klog.InfoS("MPS control daemon did not quit in time; killing it", "daemon", f.Key(), "pid", proc.Pid(), "timeout", l.cfg.StopTimeout)
	if err := proc.Kill(); err != nil {
		klog.ErrorS(err, "Cannot kill an MPS control daemon", "daemon", f.Key(), "pid", proc.Pid())
	}
	select {
	case <-proc.Done():
	case <-time.After(5 * time.Second):
	}
}

// remove deletes f's folder (its shm unmounted first), but only while nobody wants it: the
// folder is renamed away first, so a want share-plugin writes at the same moment lands in a
// new folder (share-plugin writes it again while it waits, AwaitReady).
func (l *Launcher) remove(f Folder) {
	if _, err := os.Stat(f.file(WantFile)); err == nil {
		return
	}
	if err := l.shm.unmount(f.Shm()); err != nil {
		klog.ErrorS(err, "Cannot unmount an MPS daemon's shm; folder kept", "daemon", f.Key())
		return
	}
	gone := filepath.Join(filepath.Dir(f.Dir), ".gone-"+filepath.Base(f.Dir)+"-"+strconv.FormatInt(l.clock.Now().UnixNano(), 36))
	if err := os.Rename(f.Dir, gone); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			klog.ErrorS(err, "Cannot remove an MPS daemon's folder", "daemon", f.Key())
		}
		return
	}
	if err := os.RemoveAll(gone); err != nil {
		klog.ErrorS(err, "Cannot remove an MPS daemon's folder", "folder", gone)
	}
	// The card's folder goes with its last daemon; a concurrent Request recreates it.
	_ = os.Remove(filepath.Dir(f.Dir))
}

func removeFile(p string) {
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		klog.ErrorS(err, "Cannot remove", "file", p)
	}
}
