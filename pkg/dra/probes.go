package dra

import (
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// probes is what /healthz and /readyz answer from: whether kubelet registered the plugin,
// whether the node's ResourceSlice was handed to the slice controller, and whether the
// plugin's gRPC server stopped.
type probes struct {
	// registration reports whether kubelet has registered the plugin; set before serving.
	registration func() bool
	published    atomic.Bool
	stopped      atomic.Bool
}

// registered reports whether kubelet registered the plugin and its server still runs.
func (p *probes) registered() bool {
	return !p.stopped.Load() && p.registration != nil && p.registration()
}

// live is why the plugin does not serve kubelet, or "" when it does.
func (p *probes) live() string {
	switch {
	case p.stopped.Load():
		return "the kubelet plugin server stopped"
	case !p.registered():
		return "not registered with kubelet"
	case !p.published.Load():
		return "the node's ResourceSlice is not published"
	}
	return ""
}

// Handler serves /metrics (the plugin's counters and per-card gauges plus Go runtime
// metrics), /prepared (gpushare.DRAPreparedReport as JSON), /healthz (200 once kubelet registered the plugin and the node's ResourceSlice
// is published, 503 before and once the plugin's server stopped) and /readyz (as /healthz,
// and 503 while no card takes new claims).
func (d *Driver) handler(p *probes, m *metrics) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.collectors()...)
	reg.MustRegister(newCardCollector(d, p), prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc(gpushare.DRAPreparedPath, d.servePrepared)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		answer(w, p.live())
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		why := p.live()
		if why == "" && !d.anyHealthy() {
			why = "no card takes new claims"
		}
		answer(w, why)
	})
	return mux
}

// answer writes ok, or why with 503.
func answer(w http.ResponseWriter, why string) {
	if why != "" {
		http.Error(w, why, http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok"))
}

// anyHealthy reports whether a card takes new claims.
func (d *Driver) anyHealthy() bool {
	for _, c := range d.cfg.Inventory.Devices {
		if d.healthy(c.UUID) {
			return true
		}
	}
	return false
}
