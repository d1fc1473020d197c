package routes

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/metrics"
	"github.com/gpushare/gpushare/pkg/policy"
)

// Prefix is the URL prefix of the extender verbs (the scheduler's urlPrefix ends with it).
const Prefix = "/gpushare-scheduler"

// DefaultMaxRequestBytes bounds request bodies: a filter call with 5000 full Node objects
// is tens of MiB.
const DefaultMaxRequestBytes int64 = 64 << 20

// defaultBindTimeout bounds a bind's API writes. They run detached from the scheduler's
// request (see bind), so this, not the scheduler's httpTimeout, ends a stuck write.
const defaultBindTimeout = 30 * time.Second

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
	// MaxRequestBytes defaults to DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// BindTimeout defaults to 30s (defaultBindTimeout).
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
	case c.BindTimeout < 0:
		return fmt.Errorf("routes config: bind timeout %s is negative", c.BindTimeout)
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
	if c.BindTimeout == 0 {
		c.BindTimeout = defaultBindTimeout
	}
	return nil
}

type server struct {
	Config
	memName string // the gpu-mem resource's name after '/', prefix of fit reasons
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
	s := &server{Config: cfg, memName: shortName(string(cfg.Resources.Mem))}
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

func shortName(resource string) string {
	if i := strings.LastIndexByte(resource, '/'); i >= 0 {
		return resource[i+1:]
	}
	return resource
}

// decode reads a JSON body of at most MaxRequestBytes into v; on failure it answers 400
// with a JSON error and returns false.
func (s *server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body := http.MaxBytesReader(w, r.Body, s.MaxRequestBytes)
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
