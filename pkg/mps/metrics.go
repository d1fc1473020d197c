package mps

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// launcherMetrics are gpushare-mps's counters.
type launcherMetrics struct {
	starts *prometheus.CounterVec // result: ready, failed
	exits  prometheus.Counter
}

func newLauncherMetrics() launcherMetrics {
	return launcherMetrics{
		starts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpushare_mps_daemon_starts_total",
			Help: "MPS control daemons gpushare-mps started, by result: ready (answering, its cap set) or failed (the reason is in the daemon folder's failed file and the log).",
		}, []string{"result"}),
		exits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gpushare_mps_daemon_exits_total",
			Help: "MPS control daemons that exited without being told to (their clients lost MPS; each is started again while wanted).",
		}),
	}
}

// daemonsCollector exports the running daemons per card and cap.
type daemonsCollector struct {
	l    *Launcher
	desc *prometheus.Desc
}

func (c daemonsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c daemonsCollector) Collect(ch chan<- prometheus.Metric) {
	n := map[string]int{}
	for k := range c.l.Daemons() {
		n[k.Card]++
	}
	for card, v := range n {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(v), card)
	}
}

// Handler serves /metrics (gpushare_mps_daemons per card, the start and exit counters, Go
// runtime metrics) and /healthz: 200 while the launcher has read its root within three
// intervals (and at least 10 s), 503 otherwise.
func (l *Launcher) Handler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(l.metrics.starts, l.metrics.exits, daemonsCollector{l: l, desc: prometheus.NewDesc("gpushare_mps_daemons",
		"MPS control daemons running and ready on a card, one per distinct cap (grant) its containers hold.", []string{"uuid"}, nil)},
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if age := l.clock.Since(l.lastScan()); age > max(3*l.cfg.Interval, 10*time.Second) {
			http.Error(w, "the MPS root was last read "+age.Round(time.Second).String()+" ago", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}
