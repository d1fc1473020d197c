// Package metrics defines the extender's Prometheus metrics on a registry of its own (no
// global state): handler latencies, filter rejections and bind failures by reason, and,
// collected from the cache at scrape time, the per-card allocated/total units and how far the
// ledger departs from what pods' allocation records say.
package metrics

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

// Filter rejection reasons (label values of gpushare_filter_rejections_total).
const (
	RejectCardShortfall = "card_shortfall"
	RejectInvalid       = "invalid_request"
	RejectUnknownNode   = "unknown_node"
	RejectNoCards       = "no_cards"
	// RejectHeldElsewhere: the pod's earlier bind holds cards on another node.
	RejectHeldElsewhere = "held_elsewhere"
	// RejectIsolation: the node's isolation label refuses the pod (a container on several
	// cards of an MPS node) or is invalid.
	RejectIsolation = "isolation"
	// RejectInventory: the node's GPU inventory holds a value out of range.
	RejectInventory = "inventory_out_of_range"
)

// Bind failure reasons (label values of gpushare_bind_failures_total).
const (
	BindBadRequest  = "bad_request"
	BindPodLookup   = "pod_lookup"
	BindUIDMismatch = "uid_mismatch"
	BindInvalid     = "invalid_request"
	BindNoFit       = "no_fit"
	BindPatch       = "patch"
	BindBinding     = "binding"
	// BindUnknown: the Binding failed ambiguously and the pod is not seen bound; its cards
	// stay held.
	BindUnknown = "binding_unknown"
	// BindHeldElsewhere: the pod holds cards on another node for an earlier bind.
	BindHeldElsewhere = "held_elsewhere"
	// BindInFlight: an earlier Binding of the pod was still in flight when the request ended.
	BindInFlight = "in_flight"
	// BindNoUID: the request named no pod UID (kube-scheduler always sends one).
	BindNoUID = "no_uid"
	// BindSchedulerName: the pod's spec.schedulerName is not one the extender serves.
	BindSchedulerName = "scheduler_name"
	// BindNotGPU: the pod requests no gpu-mem and the extender does not bind such pods.
	BindNotGPU = "not_gpu"
	// BindNodeUnfit: the node is one filter rejects for any pod (not a gpushare node, or
	// without cards).
	BindNodeUnfit = "node_unfit"
	// BindLease: this replica could not be sure to hold the leader lease until the Binding
	// write would end, so it did not write it.
	BindLease = "lease"
)

// CardSource gives the per-card view and the ledger's statistics at scrape time
// (implemented by *cache.Cache).
type CardSource interface {
	Inspect() []gpushare.InspectNode
	Anomalies() cache.AnomalyStats
}

var _ CardSource = (*cache.Cache)(nil)

// Metrics holds the collectors. Counters for every reason exist from the start (at 0).
type Metrics struct {
	registry *prometheus.Registry

	FilterDuration     prometheus.Histogram // seconds per filter call
	PrioritizeDuration prometheus.Histogram // seconds per prioritize call
	BindDuration       prometheus.Histogram // seconds per bind call

	filterRejections *prometheus.CounterVec
	bindFailures     *prometheus.CounterVec
	notReady         *prometheus.CounterVec
	notLeader        *prometheus.CounterVec
	throttled        *prometheus.CounterVec
	forbidden        prometheus.Counter
	leader           prometheus.Gauge
}

// New builds the metrics on a fresh registry, with Go/process collectors and, when cards is
// non-nil, the per-card gauges.
func New(cards CardSource) *Metrics {
	buckets := prometheus.ExponentialBuckets(0.0001, 2, 16) // 100µs .. ~3.3s
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		FilterDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gpushare_filter_duration_seconds", Help: "Latency of filter calls.", Buckets: buckets}),
		PrioritizeDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gpushare_prioritize_duration_seconds", Help: "Latency of prioritize calls.", Buckets: buckets}),
		BindDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gpushare_bind_duration_seconds", Help: "Latency of bind calls, API writes included.", Buckets: buckets}),
		filterRejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpushare_filter_rejections_total", Help: "Nodes rejected by filter, by reason."}, []string{"reason"}),
		bindFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpushare_bind_failures_total", Help: "Failed bind calls, by reason."}, []string{"reason"}),
		notReady: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpushare_requests_not_ready_total",
			Help: "Requests answered 503 because the node and pod caches had not synced yet, by verb."}, []string{"verb"}),
		notLeader: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpushare_requests_not_leader_total",
			Help: "Scheduler verbs answered 503 because this replica is not the elected leader, by verb."}, []string{"verb"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gpushare_leader",
			Help: "1 while this replica answers the scheduler verbs (the elected leader, or the only replica without leader election), else 0."}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpushare_requests_throttled_total",
			Help: "Requests answered 429 because the most requests allowed at once were being served, by verb."}, []string{"verb"}),
		forbidden: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gpushare_requests_forbidden_total",
			Help: "Requests to the scheduler verbs answered 403 because the client certificate names no client of --client-allowed-names."}),
	}
	for _, r := range []string{RejectCardShortfall, RejectInvalid, RejectUnknownNode, RejectNoCards, RejectHeldElsewhere, RejectIsolation, RejectInventory} {
		m.filterRejections.WithLabelValues(r)
	}
	for _, r := range []string{BindBadRequest, BindPodLookup, BindUIDMismatch, BindInvalid, BindNoFit, BindPatch, BindBinding,
		BindUnknown, BindHeldElsewhere, BindInFlight, BindNoUID, BindSchedulerName, BindNotGPU, BindNodeUnfit, BindLease} {
		m.bindFailures.WithLabelValues(r)
	}
	m.registry.MustRegister(m.FilterDuration, m.PrioritizeDuration, m.BindDuration,
		m.filterRejections, m.bindFailures, m.notReady, m.notLeader, m.throttled, m.forbidden, m.leader,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if cards != nil {
		m.registry.MustRegister(&cardCollector{src: cards})
	}
	return m
}

// Reject counts n nodes rejected by filter for reason.
func (m *Metrics) Reject(reason string, n int) {
	if n > 0 {
		m.filterRejections.WithLabelValues(reason).Add(float64(n))
	}
}

// BindFailed counts one failed bind.
func (m *Metrics) BindFailed(reason string) { m.bindFailures.WithLabelValues(reason).Inc() }

// NotReady counts one request refused before the caches synced (verb: filter, prioritize,
// bind or inspect).
func (m *Metrics) NotReady(verb string) { m.notReady.WithLabelValues(verb).Inc() }

// NotLeader counts one scheduler verb refused because this replica is not the leader (verb:
// filter, prioritize or bind).
func (m *Metrics) NotLeader(verb string) { m.notLeader.WithLabelValues(verb).Inc() }

// SetLeader sets gpushare_leader: 1 while this replica answers the scheduler verbs, else 0
// (the start value).
func (m *Metrics) SetLeader(leading bool) {
	v := 0.0
	if leading {
		v = 1
	}
	m.leader.Set(v)
}

// Throttled counts one request refused because MaxInflight requests were being served (verb:
// filter, prioritize, bind or inspect).
func (m *Metrics) Throttled(verb string) { m.throttled.WithLabelValues(verb).Inc() }

// Forbidden counts one request to the scheduler verbs refused for its client certificate's
// names (serving.Transport.AllowNames).
func (m *Metrics) Forbidden() { m.forbidden.Inc() }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// Registry is the metrics' own registry (tests gather from it).
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

var (
	cardAllocatedDesc = prometheus.NewDesc("gpushare_card_allocated_units",
		"gpu-mem units held on a card by placed and reserved pods.", []string{"node", "card"}, nil)
	cardTotalDesc = prometheus.NewDesc("gpushare_card_total_units",
		"gpu-mem units of a card.", []string{"node", "card"}, nil)
	overcommittedDesc = prometheus.NewDesc("gpushare_card_overcommitted",
		"Cards whose counted gpu-mem units exceed their size.", nil, nil)
	anomaliesDesc = prometheus.NewDesc("gpushare_pod_allocation_anomalies_total",
		"Placed pods whose allocation record turned invalid, changed to other cards, or was missing.", []string{"reason"}, nil)
	conservativeDesc = prometheus.NewDesc("gpushare_pods_conservative",
		"Placed pods counted conservatively for want of a valid allocation record: on every card of their node, after the grace period against its free units as a whole.", nil, nil)
)

// anomalyReasons are the label values of gpushare_pod_allocation_anomalies_total, all present.
var anomalyReasons = []string{cache.AnomalyInvalid, cache.AnomalyChanged, cache.AnomalyMissing}

// NewLedgerCollector is the collector of the ledger's gauges and counters (the per-card
// gpushare_card_allocated_units and gpushare_card_total_units, gpushare_card_overcommitted,
// gpushare_pod_allocation_anomalies_total, gpushare_pods_conservative), read from src at
// scrape time, for a registry other than New's: the framework plugin adds it to
// kube-scheduler's.
func NewLedgerCollector(src CardSource) prometheus.Collector { return &cardCollector{src: src} }

// cardCollector reads the cache at scrape time, so the hot paths update no gauges.
type cardCollector struct{ src CardSource }

func (c *cardCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cardAllocatedDesc
	ch <- cardTotalDesc
	ch <- overcommittedDesc
	ch <- anomaliesDesc
	ch <- conservativeDesc
}

func (c *cardCollector) Collect(ch chan<- prometheus.Metric) {
	over := 0
	for _, n := range c.src.Inspect() {
		for _, card := range n.Cards {
			idx := strconv.Itoa(card.Index)
			ch <- prometheus.MustNewConstMetric(cardAllocatedDesc, prometheus.GaugeValue, float64(card.Used), n.Name, idx)
			ch <- prometheus.MustNewConstMetric(cardTotalDesc, prometheus.GaugeValue, float64(card.Total), n.Name, idx)
			if card.Used > card.Total {
				over++
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(overcommittedDesc, prometheus.GaugeValue, float64(over))
	st := c.src.Anomalies()
	for _, r := range anomalyReasons {
		ch <- prometheus.MustNewConstMetric(anomaliesDesc, prometheus.CounterValue, float64(st.Counts[r]), r)
	}
	ch <- prometheus.MustNewConstMetric(conservativeDesc, prometheus.GaugeValue, float64(st.Conservative))
}
