// Package leader elects one extender replica, through a coordination.k8s.io Lease, to answer
// the scheduler verbs (client-go tools/leaderelection). Every replica keeps its informers and
// ledger warm; only the elected one serves, so a standby takes over within a lease duration
// of the leader's loss without rebuilding anything but what the API already holds.
package leader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Defaults of Config's timing, those of kube-scheduler and kube-controller-manager.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
	DefaultNamespace     = "kube-system"
	DefaultName          = "gpushare-extender"
)

// ErrLost is what Run returns when this replica led and could not renew its lease in time:
// another replica may lead by now, so the process must stop serving and restart to rejoin.
var ErrLost = errors.New("leader election lost")

// Config is what New needs.
type Config struct {
	// Client reads and writes the Lease.
	Client kubernetes.Interface
	// Namespace and Name of the Lease.
	Namespace, Name string
	// Identity is this replica's holderIdentity in the Lease; unique per process (see
	// NewIdentity).
	Identity string
	// LeaseDuration is how long followers wait after the last renewal they saw before taking
	// the lease; RenewDeadline is how long the leader retries renewing before it gives up;
	// RetryPeriod is the wait between attempts. LeaseDuration > RenewDeadline >
	// RetryPeriod*1.2 > 0 (leaderelection's own rule).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// OnChange, when set, is called with true when this replica starts leading and with
	// false when it stops (e.g. to set a gauge). It must not block.
	OnChange func(leading bool)
	// Clock times the renewals that BeginWrite's window rests on (default the real clock;
	// tests drive a fake one).
	Clock clock.PassiveClock
}

// Validate checks the Lease's name and the timing as leaderelection does, with the flag
// names in the errors; New also checks Client and Identity.
func (c *Config) Validate() error {
	switch {
	case c.Namespace == "" || c.Name == "":
		return fmt.Errorf("--leader-elect-resource-namespace %q, --leader-elect-resource-name %q: must not be empty", c.Namespace, c.Name)
	case c.RetryPeriod <= 0:
		return fmt.Errorf("--leader-elect-retry-period %s must be positive", c.RetryPeriod)
	case c.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(c.RetryPeriod)):
		return fmt.Errorf("--leader-elect-renew-deadline %s must exceed %g times --leader-elect-retry-period %s",
			c.RenewDeadline, leaderelection.JitterFactor, c.RetryPeriod)
	case c.LeaseDuration <= c.RenewDeadline:
		return fmt.Errorf("--leader-elect-lease-duration %s must exceed --leader-elect-renew-deadline %s", c.LeaseDuration, c.RenewDeadline)
	}
	return nil
}

// NewIdentity returns hostname + "_" + a random suffix: the hostname says which pod (or node,
// on the host network) leads, the suffix tells a restarted process from its predecessor,
// whose lease it must not take as its own. Errors: no hostname or no randomness.
func NewIdentity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("leader election identity: reading the hostname: %w", err)
	}
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("leader election identity: %w", err)
	}
	return host + "_" + hex.EncodeToString(b), nil
}

// Elector campaigns for the Lease and tells whether this replica leads. It is used once: Run
// returns for good, and the process then exits.
type Elector struct {
	cfg    Config
	le     *leaderelection.LeaderElector
	window *window

	mu      sync.Mutex
	leading bool // between OnStartedLeading and OnStoppedLeading
	led     bool // leading was ever true
	stopped bool // Run returned: never lead again (a late OnStartedLeading is ignored)
}

// New builds an Elector; it starts nothing. Errors: invalid config.
func New(cfg Config) (*Elector, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("leader election: kubernetes client is nil")
	case cfg.Identity == "":
		return nil, errors.New("leader election: empty identity")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	e := &Elector{cfg: cfg, window: newWindow(cfg.Clock, cfg)}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &windowLock{w: e.window, Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
			Client:     cfg.Client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
		}},
		LeaseDuration: cfg.LeaseDuration,
		RenewDeadline: cfg.RenewDeadline,
		RetryPeriod:   cfg.RetryPeriod,
		// The caller ends Run's ctx only after its servers drained the binds they had in
		// flight (see Run), and the release waits for any write begun with BeginWrite (a lost
		// lease is released too), so handing the lease over at once is safe and spares the
		// standby a lease duration of waiting.
		ReleaseOnCancel: true,
		Name:            cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { e.start() },
			OnStoppedLeading: e.stop,
			OnNewLeader: func(identity string) {
				klog.InfoS("leader election: leader observed", "lease", cfg.Namespace+"/"+cfg.Name, "leader", identity)
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("building the leader elector: %w", err)
	}
	e.le = le
	return e, nil
}

// Run campaigns until ctx is done or the lease is lost. End ctx only once nothing a leader
// started is left in flight: the lease is then released for a standby to take at once.
// Returns nil when ctx ended, ErrLost when this replica led and failed to renew in time.
func (e *Elector) Run(ctx context.Context) error {
	e.le.Run(ctx)
	e.mu.Lock()
	led := e.led
	e.mu.Unlock()
	if ctx.Err() != nil {
		return nil
	}
	if !led {
		// leaderelection returns before ctx ends only after leading; fail closed all the same.
		return fmt.Errorf("campaign ended before ctx: %w", ErrLost)
	}
	return ErrLost
}

// Leading reports whether this replica holds the lease now. It turns false as soon as the
// lease is seen lost or released, before Run returns: leaderelection releases a lease it
// failed to renew before it calls OnStoppedLeading.
func (e *Elector) Leading() bool {
	e.mu.Lock()
	leading := e.leading
	e.mu.Unlock()
	return leading && e.le.IsLeader()
}

// BeginWrite is to be called right before a write that only the leader may make (a
// Binding): it returns how long the write may last, so that it ends while this replica
// surely still holds the lease (RenewDeadline after the last renewal was sent, at most), and
// done, to call once the write is over (the lease is not released before). Errors wrap
// ErrNotHeld: this replica does not lead, is releasing the lease, or its last renewal is
// too old to cover any write; the caller then refuses the write and the scheduler retries,
// on the next leader.
func (e *Elector) BeginWrite() (time.Duration, func(), error) {
	if !e.Leading() {
		return 0, nil, fmt.Errorf("%w: not the leader", ErrNotHeld)
	}
	return e.window.begin()
}

// Leader is the holderIdentity of the Lease as last observed, "" before any or after a
// release.
func (e *Elector) Leader() string { return e.le.GetLeader() }

// Identity is this replica's holderIdentity.
func (e *Elector) Identity() string { return e.cfg.Identity }

// start is OnStartedLeading, which leaderelection runs in a goroutine of its own: it may come
// after stop, and is then ignored.
func (e *Elector) start() {
	e.mu.Lock()
	if e.stopped || e.leading {
		e.mu.Unlock()
		return
	}
	e.leading, e.led = true, true
	e.mu.Unlock()
	klog.InfoS("leader election: started leading", "identity", e.cfg.Identity)
	if e.cfg.OnChange != nil {
		e.cfg.OnChange(true)
	}
}

// stop is OnStoppedLeading: it runs when leaderelection's Run returns, led or not.
func (e *Elector) stop() {
	e.mu.Lock()
	was := e.leading
	e.leading, e.stopped = false, true
	e.mu.Unlock()
	if !was {
		return
	}
	klog.InfoS("leader election: stopped leading", "identity", e.cfg.Identity)
	if e.cfg.OnChange != nil {
		e.cfg.OnChange(false)
	}
}
