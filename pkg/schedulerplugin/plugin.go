package schedulerplugin

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpushare/gpushare/pkg/binding"
	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/metrics"
	"github.com/gpushare/gpushare/pkg/policy"
	"github.com/gpushare/gpushare/pkg/reasons"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = "GPUShare"

// reserveWait bounds how long Reserve waits for an earlier Binding of the same pod still in
// flight (cache.Reserve): the scheduling cycle is the scheduler's one thread, and the
// scheduler does not schedule a pod again while it is binding, so this is only a backstop.
const reserveWait = time.Second

// Plugin is GPUShare. Build it with New.
type Plugin struct {
	cache         *cache.Cache
	pol           policy.Policy
	workloadAware bool // pol scores pods without gpu-mem too (fgd)
	res           gpushare.Resources
	wording       reasons.Wording
	nodeSelector  labels.Selector           // the nodes the ledger accounts (GPUShareArgs.NodeSelector)
	lastAwaited   atomic.Pointer[types.UID] // the deleted pod awaitLedger last waited for
	binder        *binding.Binder
	parallelizer  fwk.Parallelizer       // nil: PreScore rates the nodes in one goroutine
	dra           fwk.SharedDRAManager   // the scheduler's DRA objects; nil when it runs without DRA
	draIndex      *draIndex              // the gpushare slices and allocated claims by pool; nil without DRA
	slices        sliceMemo              // the gpushare ResourceSlices' devices as read, for PreScore
	draNodes      draNodeMemo            // the DRA nodes as charged from draIndex, for PreScore
	narrowed      narrowedPods           // pods PreFilter narrowed, not placed since (narrowDRA, narrowMem)
	narrowNext    atomic.Uint64          // where narrowDRA's next window of nodes starts
	narrowScan    int                    // nodes narrowDRA rates (GPUShareArgs.ClaimNodesToRate; 0: all); -1: no narrowing
	memNarrowing  bool                   // GPUShareArgs.MemNarrowing (narrowMem)
	activator     fwk.PodActivator       // the scheduling queue, which PostFilter asks to retry a narrowed pod
	narrowings    *prometheus.CounterVec // pods narrowed and retried, by request (newNarrowings)
	rates         sync.Pool              // of *nodeRates, PreScore's buffers (score.go)
	scorers       policy.ScorerPool      // Scorers rate and rateNames reuse from pod to pod
}

var (
	_ fwk.PreFilterPlugin     = (*Plugin)(nil)
	_ fwk.PreFilterExtensions = (*Plugin)(nil)
	_ fwk.FilterPlugin        = (*Plugin)(nil)
	_ fwk.PreScorePlugin      = (*Plugin)(nil)
	_ fwk.ScorePlugin         = (*Plugin)(nil)
	_ fwk.ScoreExtensions     = (*Plugin)(nil)
	_ fwk.ReservePlugin       = (*Plugin)(nil)
	_ fwk.BindPlugin          = (*Plugin)(nil)
	_ fwk.PostFilterPlugin    = (*Plugin)(nil)
)

// Options are what the command wiring the plugin adds to New.
type Options struct {
	// Registerer, when set, gets the ledger's collector (metrics.NewLedgerCollector): the
	// per-card gauges and the allocation-record counters. gpushare-scheduler passes
	// kube-scheduler's registry, so they appear on its /metrics. A second plugin instance
	// (another profile) on the same registry keeps the first one's.
	Registerer prometheus.Registerer
}

// Factory is New with o: the plugin factory to register (app.WithPlugin(Name, Factory(o))).
func Factory(o Options) func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := New(ctx, obj, h)
		if err != nil || o.Registerer == nil {
			return p, err
		}
		pl := p.(*Plugin)
		var dup prometheus.AlreadyRegisteredError
		switch err := o.Registerer.Register(metrics.NewLedgerCollector(pl.cache)); {
		case errors.As(err, &dup):
			klog.FromContext(ctx).V(2).Info("GPUShare ledger metrics already registered by another profile")
		case err != nil:
			return nil, fmt.Errorf("%s: registering the ledger metrics: %w", Name, err)
		}
		switch err := o.Registerer.Register(pl.narrowings); {
		case errors.As(err, &dup):
			// Another profile's plugin counts into the same series.
			if existing, ok := dup.ExistingCollector.(*prometheus.CounterVec); ok {
				pl.narrowings = existing
			}
		case err != nil:
			return nil, fmt.Errorf("%s: registering the narrowing metrics: %w", Name, err)
		}
		return p, nil
	}
}

// New is the plugin factory kube-scheduler calls (app.WithPlugin(Name, New)), without
// metrics (see Factory): obj holds the GPUShareArgs (see decodeArgs), h the framework
// handle. The ledger is fed by the scheduler's own informer factory
// (h.SharedInformerFactory) and runs until ctx ends. Errors: invalid arguments, or
// informers that refuse a handler.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	pol, err := policy.New(args.Policy) // validated: cannot fail
	if err != nil {
		return nil, err
	}
	sel, err := labels.Parse(args.NodeSelector)
	if err != nil {
		return nil, err
	}
	res := args.resources()
	_, workloadAware := pol.(policy.WorkloadAware)
	cfg := cache.Config{
		Nodes:           h.SharedInformerFactory().Core().V1().Nodes().Informer(),
		Pods:            h.SharedInformerFactory().Core().V1().Pods().Informer(),
		Resources:       res,
		PodClient:       h.ClientSet().CoreV1(),
		ReservationTTL:  args.ReservationTTL.Duration,
		UnrecordedGrace: args.UnrecordedGrace.Duration,
		TrackWorkload:   workloadAware,
		Shared:          true,
		NodeSelector:    sel,
	}
	if r := h.EventRecorder(); r != nil {
		cfg.Recorder = eventRecorder{r}
	}
	c, err := cache.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: building the ledger: %w", Name, err)
	}
	go func() {
		if err := c.Run(ctx); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "gpushare ledger stopped")
		}
	}()
	var idx *draIndex
	if h.SharedDRAManager() != nil {
		rf := h.SharedInformerFactory().Resource().V1()
		if idx, err = newDRAIndex(rf.ResourceSlices().Informer(), rf.ResourceClaims().Informer()); err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
	}
	wording := reasons.NewWording(res, sel.String())
	klog.FromContext(ctx).Info("GPUShare plugin ready to sync", "policy", pol.Name(), "nodeSelector", sel.String(),
		"memResource", res.Mem, "countResource", res.Count, "reservationTTL", args.ReservationTTL.Duration,
		"unrecordedGrace", args.UnrecordedGrace.Duration)
	// No binding.Lease: kube-scheduler's own leader election covers the plugin's writes.
	// Only the leading kube-scheduler runs scheduling cycles, and one that fails to renew
	// exits at once (its OnStoppedLeading), RenewDeadline after its last renewal and before
	// a standby may lead, ending any Binding in flight with the process.
	return &Plugin{
		cache: c, pol: pol, workloadAware: workloadAware, res: res, wording: wording, nodeSelector: sel,
		parallelizer: h.Parallelizer(), dra: h.SharedDRAManager(), draIndex: idx, narrowScan: narrowScan(args),
		memNarrowing: *args.MemNarrowing, activator: h, narrowings: newNarrowings(),
		binder: &binding.Binder{Cache: c, Client: h.ClientSet(), Wording: wording, Timeout: args.BindTimeout.Duration},
	}, nil
}

// Values of gpushare_scheduler_narrowed_pods_total's labels.
const (
	narrowedGPUMem  = "gpu-mem"  // request: a pod that requests gpu-mem (narrowMem)
	narrowedClaims  = "claims"   // request: a pod with gpushare ResourceClaims (narrowDRA)
	outcomeNarrowed = "narrowed" // PreFilter kept the nodes the policy rates best
	outcomeRetried  = "retried"  // none of them took the pod: PostFilter had it retried on every node
)

// newNarrowings is gpushare_scheduler_narrowed_pods_total: how often PreFilter narrowed a
// pod's nodes, and how often none of the nodes kept took it. A retried share well above a
// few percent says narrowing keeps nodes the cluster's other filters refuse
// (GPUShareArgs.MemNarrowing).
func newNarrowings() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gpushare_scheduler_narrowed_pods_total",
		Help: "Scheduling cycles whose nodes GPUShare's PreFilter narrowed to those its policy rates best (outcome narrowed), and those none of them took, retried on every node (outcome retried); by request: gpu-mem or claims.",
	}, []string{"request", "outcome"})
}

// narrowScan is Plugin.narrowScan from the arguments.
func narrowScan(a *GPUShareArgs) int {
	if !*a.ClaimNarrowing {
		return -1
	}
	return int(*a.ClaimNodesToRate)
}

// Name implements fwk.Plugin.
func (*Plugin) Name() string { return Name }

// eventRecorder sends the ledger's Warning events (record.EventRecorder calls) through the
// scheduler's events.k8s.io recorder.
type eventRecorder struct{ r events.EventRecorder }

func (e eventRecorder) Event(obj runtime.Object, eventtype, reason, message string) {
	e.r.Eventf(obj, nil, eventtype, reason, "Scheduling", "%s", message)
}

func (e eventRecorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	e.r.Eventf(obj, nil, eventtype, reason, "Scheduling", messageFmt, args...)
}

func (e eventRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...any) {
	e.r.Eventf(obj, nil, eventtype, reason, "Scheduling", messageFmt, args...)
}
