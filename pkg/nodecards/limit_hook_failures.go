package nodecards

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/limithook"
)

// ReasonUnreadable is the reason under which LimitHookFailures counts a file of the failure
// folder that is no record the hook writes (not JSON, too large, an unknown reason, not a
// plain file) or a temporary file a killed hook left.
const ReasonUnreadable = "unreadable"

// staleTempAge is how old a hook's temporary record file must be before it counts as the
// leftover of a hook the runtime killed while writing: well past the longest runtime
// timeout a hook may get (limithook.RuntimeTimeoutSeconds of limithook.MaxDeadline).
const staleTempAge = 5 * time.Minute

// LimitHookFailures is the collector of gpushare_limit_hook_failures_total{node,reason}: at
// each scrape it reads the failure records gpushare-limit-hook left in its folder
// (limithook.WriteFailure), counts each once under its reason and removes it. The hook runs
// in the runtime on the host, so its failures reach share-plugin only this way. Safe for
// concurrent scrapes.
type LimitHookFailures struct {
	dir, node string
	desc      *prometheus.Desc
	now       func() time.Time

	mu     sync.Mutex
	counts map[string]float64 // by reason, every reason from the start
	// counted holds records counted whose removal failed, so they are not counted again.
	counted map[string]bool
}

var _ prometheus.Collector = (*LimitHookFailures)(nil)

// NewLimitHookFailures is the collector of the records in dir (share-plugin's
// --limit-hook-failure-dir) on node. A folder that does not exist yet holds no record.
func NewLimitHookFailures(dir, node string) *LimitHookFailures {
	f := &LimitHookFailures{
		dir: dir, node: node, now: time.Now,
		desc: prometheus.NewDesc("gpushare_limit_hook_failures_total",
			"Failures of gpushare-limit-hook on this node, by reason (the hook's failure records; "+ReasonUnreadable+": a record that could not be read).",
			[]string{"node", "reason"}, nil),
		counts: map[string]float64{}, counted: map[string]bool{},
	}
	// Every reason from the start, so a rate over a first failure is not lost.
	for _, r := range append(limithook.Reasons(), ReasonUnreadable) {
		f.counts[r] = 0
	}
	return f
}

// Describe sends the counter's description.
func (f *LimitHookFailures) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }

// Collect reads the folder (Scan) and sends the count of each reason.
func (f *LimitHookFailures) Collect(ch chan<- prometheus.Metric) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.scan(); err != nil {
		klog.ErrorS(err, "Reading gpushare-limit-hook's failure records", "dir", f.dir)
	}
	reasons := make([]string, 0, len(f.counts))
	for r := range f.counts {
		reasons = append(reasons, r)
	}
	slices.Sort(reasons)
	for _, r := range reasons {
		ch <- prometheus.MustNewConstMetric(f.desc, prometheus.CounterValue, f.counts[r], f.node, r)
	}
}

// Counts is the count of each reason so far, after reading the folder.
func (f *LimitHookFailures) Counts() (map[string]float64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.scan()
	out := make(map[string]float64, len(f.counts))
	for r, n := range f.counts {
		out[r] = n
	}
	return out, err
}

// scan counts and removes every record in the folder; f.mu is held. Errors: the folder
// cannot be read, or a record cannot be removed (it is still counted once).
func (f *LimitHookFailures) scan() error {
	entries, err := os.ReadDir(f.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the failure records' folder: %w", err)
	}
	var errs []error
	present := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		present[name] = true
		if f.counted[name] {
			if err := f.remove(name); err == nil {
				delete(f.counted, name)
			}
			continue
		}
		reason, ok := f.read(e)
		if !ok {
			continue // a record being written
		}
		f.counts[reason]++
		if err := f.remove(name); err != nil {
			f.counted[name] = true
			errs = append(errs, err)
		}
	}
	for name := range f.counted {
		if !present[name] {
			delete(f.counted, name)
		}
	}
	return errors.Join(errs...)
}

// read is the reason of the folder's entry e; ok is false for a temporary file the hook may
// still be writing (one not yet staleTempAge old), which is left alone.
func (f *LimitHookFailures) read(e fs.DirEntry) (reason string, ok bool) {
	name := e.Name()
	if strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp") && e.Type().IsRegular() {
		info, err := e.Info()
		if err == nil && f.now().Sub(info.ModTime()) < staleTempAge {
			return "", false
		}
		return ReasonUnreadable, true
	}
	if !e.Type().IsRegular() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, limithook.FailureRecordSuffix) {
		return ReasonUnreadable, true
	}
	rec, err := readFailureRecord(filepath.Join(f.dir, name))
	if err != nil {
		klog.InfoS("Unreadable gpushare-limit-hook failure record", "file", name, "err", err)
		return ReasonUnreadable, true
	}
	klog.InfoS("gpushare-limit-hook failed", "reason", rec.Reason, "card", rec.Card, "container", rec.ContainerID, "time", rec.Time, "message", rec.Message)
	return rec.Reason, true
}

// readFailureRecord reads the record at path. Errors: it cannot be opened, is larger than
// limithook.MaxFailureRecordBytes, is not JSON, or names a reason not in limithook.Reasons.
func readFailureRecord(path string) (limithook.FailureRecord, error) {
	file, err := os.Open(path)
	if err != nil {
		return limithook.FailureRecord{}, err
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, limithook.MaxFailureRecordBytes+1))
	if err != nil {
		return limithook.FailureRecord{}, err
	}
	if len(b) > limithook.MaxFailureRecordBytes {
		return limithook.FailureRecord{}, fmt.Errorf("larger than %d bytes", limithook.MaxFailureRecordBytes)
	}
	var r limithook.FailureRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return limithook.FailureRecord{}, err
	}
	if !slices.Contains(limithook.Reasons(), r.Reason) {
		return limithook.FailureRecord{}, fmt.Errorf("unknown reason %q", r.Reason)
	}
	return r, nil
}

// remove removes the folder's entry name, whatever it is; one already gone is no error.
func (f *LimitHookFailures) remove(name string) error {
	if err := os.RemoveAll(filepath.Join(f.dir, name)); err != nil {
		return fmt.Errorf("removing the failure record: %w", err)
	}
	return nil
}
