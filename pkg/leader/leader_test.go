package leader_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpushare/gpushare/pkg/leader"
)

// Short timing keeps the tests fast: a follower takes an unrenewed lease after 2s.
const (
	lease = 2 * time.Second
	renew = time.Second
	retry = 100 * time.Millisecond
)

var leasesGVR = coordinationv1.SchemeGroupVersion.WithResource("leases")

// newClient is a fake clientset whose Lease writes check resourceVersion as the API server
// does (the fake's tracker does not): a replica that stalled past its lease and writes a
// stale record gets a conflict instead of overwriting its successor's.
func newClient() *fake.Clientset {
	client := fake.NewClientset()
	var rv atomic.Int64
	client.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		l.ResourceVersion = strconv.FormatInt(rv.Add(1), 10)
		return true, l, client.Tracker().Create(leasesGVR, l, l.Namespace)
	})
	client.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		cur, err := client.Tracker().Get(leasesGVR, l.Namespace, l.Name)
		if err != nil {
			return true, nil, err
		}
		if cur.(*coordinationv1.Lease).ResourceVersion != l.ResourceVersion {
			return true, nil, apierrors.NewConflict(leasesGVR.GroupResource(), l.Name, errors.New("stale resourceVersion"))
		}
		l.ResourceVersion = strconv.FormatInt(rv.Add(1), 10)
		return true, l, client.Tracker().Update(leasesGVR, l, l.Namespace)
	})
	return client
}

func newElector(t *testing.T, client *fake.Clientset, identity string, changes *atomic.Int32) *leader.Elector {
	t.Helper()
	e, err := leader.New(leader.Config{
		Client: client, Namespace: "kube-system", Name: "gpushare-extender", Identity: identity,
		LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry,
		OnChange: func(bool) {
			if changes != nil {
				changes.Add(1)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// running is an Elector's Run in a goroutine, with its cancel and its result.
type running struct {
	e      *leader.Elector
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, e *leader.Elector) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &running{e: e, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Two replicas: exactly one leads and both see who; when the leader stops (its ctx ends, as
// on SIGTERM after draining), it releases the lease and the standby leads well within a
// lease duration.
func TestTwoElectorsHandOver(t *testing.T) {
	client := newClient()
	var aChanges atomic.Int32
	a := start(t, newElector(t, client, "a_1", &aChanges))
	eventually(t, 5*time.Second, "a leads", a.e.Leading)
	b := start(t, newElector(t, client, "b_1", nil))
	eventually(t, 5*time.Second, "b observes a as the leader", func() bool { return b.e.Leader() == "a_1" })
	for range 20 { // a renews: b never takes over
		if !a.e.Leading() || b.e.Leading() {
			t.Fatalf("a leading %v, b leading %v; want only a", a.e.Leading(), b.e.Leading())
		}
		time.Sleep(lease / 10)
	}

	stopped := time.Now()
	a.cancel()
	if err := <-a.done; err != nil {
		t.Errorf("a's Run after its ctx ended: %v, want nil", err)
	}
	a.done <- nil // for the cleanup
	if a.e.Leading() {
		t.Error("a still leading after Run returned")
	}
	if got := aChanges.Load(); got != 2 {
		t.Errorf("a's OnChange called %d times, want 2 (started, stopped)", got)
	}
	eventually(t, lease, "b leads after a released the lease", b.e.Leading)
	t.Logf("handover after %s", time.Since(stopped))
	if got := b.e.Leader(); got != "b_1" {
		t.Errorf("b observes leader %q, want b_1", got)
	}
}

// A leader that cannot renew (the API refuses its writes) stops leading, Run reports ErrLost
// so that the process exits, and the standby takes the lease once it expires.
func TestLostLease(t *testing.T) {
	client := newClient()
	var cutOff atomic.Bool
	client.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if cutOff.Load() && l.Spec.HolderIdentity != nil && strings.HasPrefix(*l.Spec.HolderIdentity, "a_") {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	a := start(t, newElector(t, client, "a_1", nil))
	eventually(t, 5*time.Second, "a leads", a.e.Leading)
	b := start(t, newElector(t, client, "b_1", nil))
	eventually(t, 5*time.Second, "b observes a", func() bool { return b.e.Leader() == "a_1" })

	cutOff.Store(true)
	select {
	case err := <-a.done:
		if !errors.Is(err, leader.ErrLost) {
			t.Errorf("a's Run: %v, want ErrLost", err)
		}
		a.done <- nil
	case <-time.After(renew + 2*time.Second):
		t.Fatal("a's Run did not return after it could not renew")
	}
	if a.e.Leading() {
		t.Error("a leading after losing the lease")
	}
	eventually(t, lease+2*time.Second, "b leads after a's lease expired", b.e.Leading)
}

func TestConfigValidate(t *testing.T) {
	valid := func() leader.Config {
		return leader.Config{Client: fake.NewClientset(), Namespace: "kube-system", Name: "gpushare-extender", Identity: "h_1",
			LeaseDuration: leader.DefaultLeaseDuration, RenewDeadline: leader.DefaultRenewDeadline, RetryPeriod: leader.DefaultRetryPeriod}
	}
	tests := []struct {
		name    string
		mod     func(*leader.Config)
		wantErr string
	}{
		{"defaults", func(*leader.Config) {}, ""},
		{"no namespace", func(c *leader.Config) { c.Namespace = "" }, "--leader-elect-resource-namespace"},
		{"no name", func(c *leader.Config) { c.Name = "" }, "--leader-elect-resource-name"},
		{"no identity", func(c *leader.Config) { c.Identity = "" }, "identity"},
		{"zero retry", func(c *leader.Config) { c.RetryPeriod = 0 }, "--leader-elect-retry-period"},
		// 1.2 * 2s = 2.4s: a 2s renew deadline leaves no room for one retry.
		{"renew within jitter of retry", func(c *leader.Config) { c.RenewDeadline = 2 * time.Second }, "--leader-elect-renew-deadline"},
		{"lease not above renew", func(c *leader.Config) { c.LeaseDuration = 10 * time.Second }, "--leader-elect-lease-duration"},
		{"no client", func(c *leader.Config) { c.Client = nil }, "client"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mod(&c)
			_, err := leader.New(c)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("New: %v, want an error naming %q", err, tc.wantErr)
			}
		})
	}
}

func TestNewIdentity(t *testing.T) {
	a, err := leader.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := leader.NewIdentity()
	i := strings.LastIndexByte(a, '_')
	host, suffix := a[:max(i, 0)], a[i+1:]
	if i < 0 || host == "" || len(suffix) != 8 || a == b {
		t.Fatalf("identities %q, %q: want hostname_<8 hex digits>, different each time", a, b)
	}
}

// The leader's writes may last at most RenewDeadline from its last renewal; a follower, and
// a replica that stopped, may begin none.
func TestBeginWrite(t *testing.T) {
	client := newClient()
	a := start(t, newElector(t, client, "a_1", nil))
	eventually(t, 5*time.Second, "a leads", a.e.Leading)
	b := start(t, newElector(t, client, "b_1", nil))
	eventually(t, 5*time.Second, "b observes a", func() bool { return b.e.Leader() == "a_1" })

	left, done, err := a.e.BeginWrite()
	if err != nil || left <= 0 || left > renew {
		t.Fatalf("leader's BeginWrite: %s, %v; want at most the renew deadline %s", left, err, renew)
	}
	done()
	if _, _, err := b.e.BeginWrite(); !errors.Is(err, leader.ErrNotHeld) {
		t.Errorf("follower's BeginWrite: %v, want ErrNotHeld", err)
	}
	a.cancel()
	<-a.done
	a.done <- nil
	if _, _, err := a.e.BeginWrite(); !errors.Is(err, leader.ErrNotHeld) {
		t.Errorf("BeginWrite after Run returned: %v, want ErrNotHeld", err)
	}
}
