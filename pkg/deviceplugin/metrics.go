package deviceplugin

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// collector computes the per-card gauges at scrape time from the informer and NVML, so
// there is no state to keep in sync.
type collector struct {
	p         *Plugin
	total     *prometheus.Desc
	allocated *prometheus.Desc
	healthy   *prometheus.Desc
	usedMiB   *prometheus.Desc
	reg       *prometheus.Desc
	streams   *prometheus.Desc
	served    *prometheus.Desc
}

func newCollector(p *Plugin) *collector {
	labels := []string{"node", "index", "uuid", "model"}
	return &collector{
		p:         p,
		total:     prometheus.NewDesc("gpushare_card_units", "gpu-mem units of the card.", labels, nil),
		allocated: prometheus.NewDesc("gpushare_card_allocated_units", "gpu-mem units held on the card by pods on this node (from their allocation annotations).", labels, nil),
		healthy:   prometheus.NewDesc("gpushare_card_healthy", "1 when the card takes new pods, 0 after a critical XID until the quiet period passes.", labels, nil),
		usedMiB:   prometheus.NewDesc("gpushare_card_memory_used_mib", "GPU memory in use on the card as NVML reports it, in MiB.", labels, nil),
		reg:       prometheus.NewDesc("gpushare_plugin_registered", "1 when the plugin is registered with kubelet.", []string{"node"}, nil),
		streams: prometheus.NewDesc("gpushare_plugin_list_and_watch_streams",
			"ListAndWatch streams open to kubelet that have sent the device list; 0 while registered means kubelet cannot admit gpu-mem pods yet.",
			[]string{"node"}, nil),
		served: prometheus.NewDesc("gpushare_plugin_card_served_units",
			"gpu-mem units this share-plugin process handed out on the card to live pods (per pod by the effective-request rule), as GET /served reports.",
			[]string{"card", "uuid"}, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.total, c.allocated, c.healthy, c.usedMiB, c.reg, c.streams, c.served} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	p := c.p
	node := p.node.Name()
	used := p.allocatedUnits()
	for _, card := range p.cards.List() {
		l := []string{node, strconv.Itoa(card.Index), card.UUID, card.Model}
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(card.Units), l...)
		ch <- prometheus.MustNewConstMetric(c.allocated, prometheus.GaugeValue, float64(used[card.Index]), l...)
		ch <- prometheus.MustNewConstMetric(c.healthy, prometheus.GaugeValue, boolFloat(p.health.Healthy(card.UUID)), l...)
		if !p.node.Simulated() { // simulated cards report no used memory
			mib, err := p.node.NVML().UsedMemoryMiB(card.Index)
			if err != nil {
				klog.V(2).InfoS("Reading GPU memory use failed", "index", card.Index, "err", err)
				continue
			}
			ch <- prometheus.MustNewConstMetric(c.usedMiB, prometheus.GaugeValue, float64(mib), l...)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.reg, prometheus.GaugeValue, boolFloat(p.registered()), node)
	ch <- prometheus.MustNewConstMetric(c.streams, prometheus.GaugeValue, float64(p.streams.Load()), node)
	for _, sc := range p.servedReport().Cards {
		ch <- prometheus.MustNewConstMetric(c.served, prometheus.GaugeValue, float64(sc.ServedUnits), strconv.Itoa(sc.Index), sc.UUID)
	}
}

// allocatedUnits sums, per card index, what the pods on this node hold while they may hold
// memory (holdsMemory).
func (p *Plugin) allocatedUnits() map[int]int64 {
	out := map[int]int64{}
	for _, pod := range p.podsOnNode() {
		if !holdsMemory(pod, p.node.Name()) {
			continue
		}
		a, ok, err := p.cfg.Resources.ReadAllocation(pod)
		if err != nil || !ok {
			continue
		}
		for card, u := range a.CardUsage(pod) {
			out[card] += u
		}
	}
	return out
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Handler serves /metrics (the plugin's own registry, the limit hook's failures when
// LimitHookFailureDir is set, plus Go runtime metrics), /healthz (200 while registered with
// kubelet, 503 otherwise), /readyz (200 once registered and a ListAndWatch stream has sent
// kubelet the device list, 503 otherwise) and GET /served (gpushare.ServedReport as JSON).
//
// /readyz is the DaemonSet's readiness probe: kubelet marks the fake devices healthy only
// when it has read a device list, and until then it refuses every gpu-mem pod with
// UnexpectedAdmissionError although the node's allocatable may still show the units; a
// rollout (or helm install --wait) that waits for /readyz does not hand out such pods.
func (p *Plugin) Handler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(p), p.usage.Collector(), p.preflight, p.ambiguous, prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	if p.cfg.LimitHookFailureDir != "" {
		reg.MustRegister(nodecards.NewLimitHookFailures(p.cfg.LimitHookFailureDir, p.node.Name()))
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET "+gpushare.ServedPath, p.serveServed)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !p.registered() {
			http.Error(w, "not registered with kubelet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case !p.registered():
			http.Error(w, "not registered with kubelet", http.StatusServiceUnavailable)
		case p.streams.Load() == 0:
			http.Error(w, "registered; kubelet has not read the device list yet", http.StatusServiceUnavailable)
		default:
			_, _ = w.Write([]byte("ok"))
		}
	})
	return mux
}
