package binding_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpushare/gpushare/pkg/binding"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/metrics"
)

// deadlineIs fails the test unless ctx ends d after some instant between before and after
// (the deadline is set during the call, so no clock reading is compared with a guess).
func deadlineIs(t *testing.T, what string, ctx context.Context, before, after time.Time, d time.Duration) {
	t.Helper()
	if ctx == nil {
		t.Errorf("%s: no call", what)
		return
	}
	dl, ok := ctx.Deadline()
	if !ok || dl.Before(before.Add(d)) || dl.After(after.Add(d)) {
		t.Errorf("%s: deadline %v after the call (set: %v), want %v", what, dl.Sub(before), ok, d)
	}
}

// The writes run on their own deadline, detached from the caller's context: Timeout (or
// DefaultBindTimeout), shortened to what the Lease leaves. A Lease that refuses stops the
// bind before any write; its done is called once the writes are over, before the read-back,
// which has a deadline of its own.
func TestWriteDeadlineAndLease(t *testing.T) {
	gone, cancel := context.WithDeadline(context.Background(), epoch) // long past
	defer cancel()
	timeout := apierrors.NewTimeoutError("request timed out", 1)
	tests := []struct {
		name    string
		timeout time.Duration
		lease   *lease
		ctx     context.Context // the caller's; nil: Background
		earlier error           // an earlier Binding of the pod failed so, its outcome unknown
		bindErr error           // this bind's Binding answer
		// wantWrite bounds the Binding's context, wantRead the read-back's (0: no such call).
		wantWrite, wantRead time.Duration
		wantEvents          []string
		wantLabel, wantMsg  string // "": Bind succeeds
		wantHold            string
	}{
		{
			name: "no Timeout: DefaultBindTimeout bounds the write", wantWrite: binding.DefaultBindTimeout,
			wantEvents: []string{"bind"}, wantHold: landed,
		},
		{
			name: "Timeout bounds the write", timeout: 5 * time.Second, wantWrite: 5 * time.Second,
			wantEvents: []string{"bind"}, wantHold: landed,
		},
		{
			name: "Lease leaving less than Timeout bounds the write", timeout: time.Hour, lease: &lease{left: 2 * time.Second},
			wantWrite: 2 * time.Second, wantEvents: []string{"lease begin", "bind", "lease done"}, wantHold: landed,
		},
		{
			name: "Timeout shorter than the Lease's time bounds the write", timeout: 3 * time.Second, lease: &lease{left: time.Hour},
			wantWrite: 3 * time.Second, wantEvents: []string{"lease begin", "bind", "lease done"}, wantHold: landed,
		},
		{
			// A Binding on its way must not be cut off by a caller that gave up, nor its read-back.
			name: "caller gone: the write and the read-back go on, each on its own deadline; lease done before the read-back",
			ctx:  gone, timeout: 7 * time.Second, lease: &lease{left: 2 * time.Second}, bindErr: timeout,
			wantWrite: 2 * time.Second, wantRead: 7 * time.Second,
			wantEvents: []string{"lease begin", "bind", "lease done", "get"},
			wantLabel:  metrics.BindUnknown, wantMsg: "request timed out; outcome unknown, pod not bound yet", wantHold: unknown,
		},
		{
			name: "Lease refuses a first bind: no write, cards released", lease: &lease{err: errors.New("lease expired")},
			wantEvents: []string{"lease begin"}, wantLabel: metrics.BindLease,
			wantMsg:  "binding pod default/p to n1: not writing the Binding: lease expired (the scheduler retries on the leader)",
			wantHold: released,
		},
		{
			// The earlier Binding may still land on these cards.
			name: "Lease refuses a retry: no write, cards kept", lease: &lease{err: errors.New("lease expired")}, earlier: timeout,
			wantEvents: []string{"lease begin"}, wantLabel: metrics.BindLease,
			wantMsg:  "binding pod default/p to n1: not writing the Binding: lease expired (the scheduler retries on the leader)",
			wantHold: unknown,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pod("p", 6, 0)
			a := &api{bindErrs: []error{tc.bindErr}}
			if tc.earlier != nil {
				a.bindErrs = []error{tc.earlier, tc.bindErr}
			}
			e := newEnv(t, a, node("n1", 16), p)
			if tc.earlier != nil {
				if err := e.bind(context.Background(), t, p, "n1"); !errors.Is(err, tc.earlier) {
					t.Fatalf("earlier bind: %v, want %v", err, tc.earlier)
				}
			}
			e.binder.Timeout = tc.timeout
			if tc.lease != nil {
				tc.lease.calls = e.calls
				e.binder.Lease = tc.lease
			}
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			sent, logged := len(e.bindings()), len(e.calls.log())
			before := time.Now()
			err := e.bind(ctx, t, p, "n1")
			after := time.Now()
			if tc.wantLabel == "" {
				if err != nil {
					t.Fatalf("Bind: %v", err)
				}
			} else if be := asError(t, err); be.Label != tc.wantLabel || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("Bind: %q label %q,\nwant %q label %q", err, be.Label, tc.wantMsg, tc.wantLabel)
			}
			if tc.bindErr != nil && !errors.Is(err, tc.bindErr) {
				t.Errorf("Bind: %v does not wrap the Binding's error", err)
			}
			if d := cmp.Diff(tc.wantEvents, e.calls.log()[logged:]); d != "" {
				t.Errorf("calls (-want +got):\n%s", d)
			}
			if tc.wantWrite > 0 {
				deadlineIs(t, "Binding", e.calls.ctx("bind"), before, after, tc.wantWrite)
			} else if n := len(e.bindings()) - sent; n != 0 {
				t.Errorf("%d Bindings sent, want none", n)
			}
			if tc.wantRead > 0 {
				deadlineIs(t, "read-back", e.calls.ctx("get"), before, after, tc.wantRead)
			}
			if got := e.hold(t, p); got != tc.wantHold {
				t.Errorf("hold %s, want %s", got, tc.wantHold)
			}
		})
	}
}

// Bind annotations the pod was created with must not outlive the bind, and a Binding only
// adds annotations: those the Binding does not set are deleted first by a patch that holds
// only for this pod UID. A failed patch fails the bind: released when no Binding was ever
// sent with the cards, else settled by the read-back (after the Lease is told the writes are
// over) as a failed Binding is.
func TestWriteRemovesStaleAnnotationsFirst(t *testing.T) {
	gr := podsGVR.GroupResource()
	timeout := apierrors.NewTimeoutError("request timed out", 1)
	tests := []struct {
		name       string
		stale      map[string]string
		earlier    bool     // an earlier bind patched, then its Binding timed out: outcome unknown
		patchErr   error    // this bind's patch answer
		wantPatch  []string // keys the patch deletes; nil: no patch
		wantEvents []string
		wantLabel  string // "": Bind succeeds
		wantMsg    string
		wantHold   string
	}{
		{
			name:       "keys the Binding overwrites need no patch",
			stale:      map[string]string{gpushare.AnnotationIndex: "3", gpushare.AnnotationAssigned: "true"},
			wantEvents: []string{"lease begin", "bind", "lease done"}, wantHold: landed,
		},
		{
			name:       "keys the Binding does not set are deleted before it",
			stale:      map[string]string{gpushare.AnnotationAllocated: "app/0", gpushare.AnnotationInitAllocation: `{"0":{"0":1}}`, gpushare.AnnotationIndex: "3"},
			wantPatch:  []string{gpushare.AnnotationAllocated, gpushare.AnnotationInitAllocation},
			wantEvents: []string{"lease begin", "patch", "bind", "lease done"}, wantHold: landed,
		},
		{
			name:  "patch fails on a first bind: no Binding, cards released",
			stale: map[string]string{gpushare.AnnotationAllocated: "app/0"}, patchErr: apierrors.NewInternalError(errors.New("boom")),
			wantPatch: []string{gpushare.AnnotationAllocated}, wantEvents: []string{"lease begin", "patch", "lease done"},
			wantLabel: metrics.BindPatch, wantHold: released,
			wantMsg: "removing stale allocation annotations from pod default/p: Internal error occurred: boom (reservation released)",
		},
		{
			name:  "patch fails on a retry, unbound, outcome unknown: cards kept",
			stale: map[string]string{gpushare.AnnotationAllocated: "app/0"}, earlier: true, patchErr: apierrors.NewInternalError(errors.New("boom")),
			wantPatch: []string{gpushare.AnnotationAllocated}, wantEvents: []string{"lease begin", "patch", "lease done", "get"},
			wantLabel: metrics.BindUnknown, wantHold: unknown,
			wantMsg: "removing stale allocation annotations from pod default/p: Internal error occurred: boom; outcome unknown, pod not bound yet",
		},
		{
			name:  "patch refused on a retry, unbound: cards released",
			stale: map[string]string{gpushare.AnnotationAllocated: "app/0"}, earlier: true, patchErr: apierrors.NewConflict(gr, "p", errors.New("uid precondition")),
			wantPatch: []string{gpushare.AnnotationAllocated}, wantEvents: []string{"lease begin", "patch", "lease done", "get"},
			wantLabel: metrics.BindBinding, wantHold: released, wantMsg: "(pod not bound; reservation released)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pod("p", 6, 0)
			p.Annotations = tc.stale
			a := &api{patchErrs: []error{tc.patchErr}}
			if tc.earlier {
				a.patchErrs = []error{nil, tc.patchErr}
				a.bindErrs = []error{timeout}
			}
			e := newEnv(t, a, node("n1", 16), p)
			if tc.earlier {
				if err := e.bind(context.Background(), t, p, "n1"); !errors.Is(err, timeout) {
					t.Fatalf("earlier bind: %v, want a timeout", err)
				}
			}
			// Under a Lease: the patch is one of the writes it bounds.
			e.binder.Lease = &lease{left: 2 * time.Second, calls: e.calls}
			logged, actions := len(e.calls.log()), len(e.client.Actions())
			before := time.Now()
			err := e.bind(context.Background(), t, p, "n1")
			after := time.Now()
			if tc.wantLabel == "" {
				if err != nil {
					t.Fatalf("Bind: %v", err)
				}
			} else if be := asError(t, err); be.Label != tc.wantLabel || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("Bind: %q label %q,\nwant %q label %q", err, be.Label, tc.wantMsg, tc.wantLabel)
			}
			if d := cmp.Diff(tc.wantEvents, e.calls.log()[logged:]); d != "" {
				t.Errorf("calls (-want +got):\n%s", d)
			}
			var patch *struct {
				Metadata struct {
					UID         string             `json:"uid"`
					Annotations map[string]*string `json:"annotations"`
				} `json:"metadata"`
			}
			for _, act := range e.client.Actions()[actions:] {
				if pa, ok := act.(k8stesting.PatchAction); ok {
					if err := json.Unmarshal(pa.GetPatch(), &patch); err != nil {
						t.Fatal(err)
					}
				}
			}
			switch {
			case tc.wantPatch == nil && patch != nil:
				t.Errorf("patched %v, want no patch", patch.Metadata)
			case tc.wantPatch != nil && patch == nil:
				t.Errorf("no patch, want one deleting %v", tc.wantPatch)
			case tc.wantPatch != nil:
				want := map[string]*string{}
				for _, k := range tc.wantPatch {
					want[k] = nil
				}
				if d := cmp.Diff(want, patch.Metadata.Annotations); d != "" || patch.Metadata.UID != string(p.UID) {
					t.Errorf("patch uid %q (want %q), annotations (-want +got):\n%s", patch.Metadata.UID, p.UID, d)
				}
				deadlineIs(t, "patch", e.calls.ctx("patch"), before, after, 2*time.Second)
			}
			if got := e.hold(t, p); got != tc.wantHold {
				t.Errorf("hold %s, want %s", got, tc.wantHold)
			}
		})
	}
}

// A panic below Write leaves the cards held: a Binding may have been sent.
func TestWritePanicKeepsTheCards(t *testing.T) {
	p := pod("p", 6, 0)
	e := newEnv(t, &api{bindPanics: true}, node("n1", 16), p)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Bind did not panic")
			}
		}()
		_ = e.bind(context.Background(), t, p, "n1")
	}()
	if got := e.hold(t, p); got != unknown {
		t.Errorf("hold %s, want unknown", got)
	}
}
