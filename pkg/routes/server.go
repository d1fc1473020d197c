package routes

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/binding"
	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/metrics"
	"github.com/gpushare/gpushare/pkg/policy"
	"github.com/gpushare/gpushare/pkg/reasons"
)

// Prefix is the URL prefix of the extender verbs (the scheduler's urlPrefix ends with it).
const Prefix = "/gpushare-scheduler"

// DefaultMaxRequestBytes bounds request bodies: a filter call naming 15,000 nodes
// (nodeCacheCapable) is about 200 KB, and the pod rarely more than tens of KB. Full Node
// objects (a scheduler without nodeCacheCapable) are several KB each: 5000 of them do not
// fit, and such a scheduler is not supported beyond the cap.
const DefaultMaxRequestBytes int64 = 4 << 20

// DefaultMaxNodesPerRequest bounds the nodes one filter or prioritize call may list.
const DefaultMaxNodesPerRequest = 20000

// DefaultMaxInflight bounds the scheduler-verb and inspect requests served at once. The
// scheduler sends filter and prioritize one pod at a time, but binds concurrently, one per
// pod in its binding cycle: 256 covers a burst of binds against a slow API server.
const DefaultMaxInflight = 256

// DefaultPodGetQPS and DefaultPodGetBurst rate-limit bind's API reads of pods the informer
// does not hold: normally none (the scheduler learns of pods from its own informer, at the
// same time), so only a bogus or hostile name costs an API call, and at most these many.
const (
	DefaultPodGetQPS   = 5.0
	DefaultPodGetBurst = 10
)

// DefaultSchedulerName is the one scheduler bind serves unless told otherwise, and the name
// the API server gives a pod created without spec.schedulerName.
const DefaultSchedulerName = corev1.DefaultSchedulerName

// DefaultBindTimeout bounds a bind's API writes, and separately the read-back that settles
// a failed one. They run detached from the scheduler's request (see bind), so this, not the
// scheduler's httpTimeout, ends a stuck write.
const DefaultBindTimeout = binding.DefaultBindTimeout

// Config is what New needs.
type Config struct {
	Cache     *cache.Cache
	Policy    policy.Policy
	Resources gpushare.Resources
	// Client writes the bind annotations and the Binding, and reads a pod to bind that the
	// cache's informer does not hold yet.
	Client kubernetes.Interface
	// Metrics defaults to a fresh metrics.New(Cache).
	Metrics *metrics.Metrics
	// NodeSelector is only used in the reason given for nodes the cache does not know
	// (default "cgpu=true").
	NodeSelector string
	// MaxRequestBytes bounds request bodies (default DefaultMaxRequestBytes); larger ones are
	// answered 400.
	MaxRequestBytes int64
	// MaxNodesPerRequest bounds the nodes a filter or prioritize call lists (default
	// DefaultMaxNodesPerRequest); more are answered 400.
	MaxNodesPerRequest int
	// MaxInflight bounds the filter, prioritize, bind and inspect requests served at once
	// (default DefaultMaxInflight); more are answered 429 with Retry-After.
	MaxInflight int
	// PodGetQPS (per second) and PodGetBurst rate-limit bind's API reads of pods the
	// informer does not hold (defaults DefaultPodGetQPS, DefaultPodGetBurst); a bind over
	// the rate fails without a read.
	PodGetQPS   float64
	PodGetBurst int
	// SchedulerNames are the spec.schedulerName values of the pods bind accepts (default
	// DefaultSchedulerName only); other pods are refused.
	SchedulerNames []string
	// BindNonGPUPods lets bind bind pods that request no gpu-mem (refused otherwise). Only
	// a scheduler configuration that sends such pods to the extender needs it: one whose
	// extender entry has bindVerb but no managedResources.
	BindNonGPUPods bool
	// Leadership, when set, limits filter, prioritize and bind to the elected replica; the
	// others answer them 503. /readyz does not depend on it: it is 200 on every replica whose
	// cache synced, followers included. A bind also asks it, right before its Binding write,
	// how long the write may last (binding.Lease). Nil: this replica always answers.
	Leadership Leadership
	// BindTimeout defaults to DefaultBindTimeout.
	BindTimeout time.Duration
	// Version is served at /version.
	Version string
}

func (c *Config) validate() error {
	switch {
	case c.Cache == nil:
		return errors.New("routes config: cache is nil")
	case c.Policy == nil:
		return errors.New("routes config: policy is nil")
	case c.Client == nil:
		return errors.New("routes config: kubernetes client is nil")
	case c.MaxRequestBytes < 0:
		return fmt.Errorf("routes config: max request bytes %d is negative", c.MaxRequestBytes)
	case c.MaxNodesPerRequest < 0:
		return fmt.Errorf("routes config: max nodes per request %d is negative", c.MaxNodesPerRequest)
	case c.MaxInflight < 0:
		return fmt.Errorf("routes config: max in-flight requests %d is negative", c.MaxInflight)
	case c.PodGetQPS < 0 || c.PodGetBurst < 0:
		return fmt.Errorf("routes config: pod GET rate %g/s, burst %d: negative", c.PodGetQPS, c.PodGetBurst)
	case c.BindTimeout < 0:
		return fmt.Errorf("routes config: bind timeout %s is negative", c.BindTimeout)
	}
	for _, name := range c.SchedulerNames {
		if name == "" {
			return errors.New("routes config: empty scheduler name")
		}
	}
	if err := c.Resources.Validate(); err != nil {
		return fmt.Errorf("routes config: %w", err)
	}
	if c.Metrics == nil {
		c.Metrics = metrics.New(c.Cache)
	}
	if c.NodeSelector == "" {
		c.NodeSelector = gpushare.NodeLabelKey + "=" + gpushare.NodeLabelValue
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.MaxNodesPerRequest == 0 {
		c.MaxNodesPerRequest = DefaultMaxNodesPerRequest
	}
	if c.MaxInflight == 0 {
		c.MaxInflight = DefaultMaxInflight
	}
	if c.PodGetQPS == 0 {
		c.PodGetQPS = DefaultPodGetQPS
	}
	if c.PodGetBurst == 0 {
		c.PodGetBurst = DefaultPodGetBurst
	}
	if len(c.SchedulerNames) == 0 {
		c.SchedulerNames = []string{DefaultSchedulerName}
	}
	if c.BindTimeout == 0 {
		c.BindTimeout = DefaultBindTimeout
	}
	return nil
}

type server struct {
	Config
	wording  reasons.Wording
	binder   *binding.Binder
	served   sets.Set[string]
	inflight chan struct{}     // one slot per request being served (see limit)
	podGets  *rate.Limiter     // bind's API reads of pods the informer does not hold
	scorers  policy.ScorerPool // prioritize's Scorers, reused from request to request
}

// Paths of the probes, which Handlers.Diagnostics serves to anyone (kubelet presents no
// client certificate).
const (
	HealthzPath = "/healthz"
	ReadyzPath  = "/readyz"
)

// Handlers are the extender's two HTTP surfaces, served on separate listeners so that the
// scheduler verbs, which write, share nothing with what monitoring and people read.
type Handlers struct {
	verbs, diagnostics http.Handler
}

// Verbs serves the scheduler verbs: POST Prefix/filter, Prefix/prioritize and Prefix/bind.
func (h *Handlers) Verbs() http.Handler { return h.verbs }

// Diagnostics serves GET /healthz, /readyz, /version, /metrics and Prefix/inspect[/node].
func (h *Handlers) Diagnostics() http.Handler { return h.diagnostics }

// New returns the extender's handlers. Errors: invalid config.
func New(cfg Config) (*Handlers, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &server{
		Config:   cfg,
		wording:  reasons.NewWording(cfg.Resources, cfg.NodeSelector),
		served:   sets.New(cfg.SchedulerNames...),
		inflight: make(chan struct{}, cfg.MaxInflight),
		podGets:  rate.NewLimiter(rate.Limit(cfg.PodGetQPS), cfg.PodGetBurst),
	}
	s.binder = &binding.Binder{Cache: cfg.Cache, Client: cfg.Client, Wording: s.wording, Timeout: cfg.BindTimeout}
	if cfg.Leadership != nil {
		s.binder.Lease = cfg.Leadership
	}
	verbs := newRouter()
	s.installFilter(verbs)
	s.installPrioritize(verbs)
	s.installBind(verbs)
	diagnostics := newRouter()
	s.installInspect(diagnostics)
	s.installHealth(diagnostics)
	return &Handlers{verbs: verbs, diagnostics: diagnostics}, nil
}

// newRouter is a router answering JSON errors for unknown paths, wrong methods and panics.
func newRouter() *httprouter.Router {
	r := httprouter.New()
	r.HandleMethodNotAllowed = true
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, errors.New("method not allowed"))
	})
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Errorf("no route for %s", req.URL.Path))
	})
	r.PanicHandler = func(w http.ResponseWriter, req *http.Request, v any) {
		klog.ErrorS(fmt.Errorf("panic: %v", v), "handler panicked", "path", req.URL.Path)
		writeError(w, http.StatusInternalServerError, errors.New("internal error"))
	}
	return r
}

// decode reads a JSON body of at most MaxRequestBytes into v; on failure it answers 400
// with a JSON error and returns false.
func (s *server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, ok := s.body(w, r)
	if !ok {
		return false
	}
	if err := json.NewDecoder(body).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, bodyError(err))
		return false
	}
	return true
}

// writeJSON encodes v with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		klog.V(2).InfoS("writing response", "err", err)
	}
}

type errorBody struct {
	Error string `json:"error"`
}

// writeError answers {"error": "..."} with the given status.
func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, errorBody{Error: err.Error()})
}

// since returns the seconds elapsed since start, for the latency histograms.
func since(start time.Time) float64 { return time.Since(start).Seconds() }
