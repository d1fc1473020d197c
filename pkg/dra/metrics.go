package dra

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Failure reasons of the prepare and unprepare counters: a fixed set, so the label stays
// bounded whatever the error text.
const (
	reasonNotAllocated      = "not_allocated"      // no allocation, or none of this driver
	reasonUnknownDevice     = "unknown_device"     // a device or pool that is no card of this node
	reasonInvalidCapacity   = "invalid_capacity"   // consumed memory that is not whole units
	reasonOverCard          = "over_card"          // more of a card than the card has
	reasonOverFree          = "over_free"          // more than the claims already prepared leave
	reasonUnhealthy         = "unhealthy"          // a card that is unhealthy now
	reasonIsolation         = "isolation"          // an isolation label this node cannot enforce or read
	reasonSharedClaim       = "shared_claim"       // on a limit node, a claim reserved for more than one pod
	reasonNoPod             = "no_pod"             // on a limit node, a claim reserved for no pod
	reasonCDISpec           = "cdi_spec"           // the claim's CDI spec could not be written or removed
	reasonCheckpoint        = "checkpoint"         // the checkpoint could not be written
	reasonAllocationChanged = "allocation_changed" // a prepared claim allocated again differently under its UID
	reasonOther             = "other"
)

var (
	prepareReasons = []string{reasonNotAllocated, reasonUnknownDevice, reasonInvalidCapacity, reasonOverCard,
		reasonOverFree, reasonUnhealthy, reasonIsolation, reasonSharedClaim, reasonNoPod, reasonCDISpec, reasonCheckpoint, reasonAllocationChanged, reasonOther}
	unprepareReasons = []string{reasonCDISpec, reasonCheckpoint}
)

// reasonError is a prepare failure tagged, where it arises, with its metrics reason (one of
// prepareReasons); errors wrap it, so the reason survives added context.
type reasonError struct {
	reason string
	err    error
}

func (e *reasonError) Error() string { return e.err.Error() }
func (e *reasonError) Unwrap() error { return e.err }

// failed tags err with reason.
func failed(reason string, err error) error { return &reasonError{reason: reason, err: err} }

// prepareReason is the reason failed tagged err with; reasonOther for an untagged error.
func prepareReason(err error) string {
	if r, ok := errors.AsType[*reasonError](err); ok {
		return r.reason
	}
	return reasonOther
}

// metrics are the DRA plugin's counters; the per-card gauges come from cardCollector at
// scrape time.
type metrics struct {
	prepared        prometheus.Counter
	prepareFailed   *prometheus.CounterVec
	unprepared      prometheus.Counter
	unprepareFailed *prometheus.CounterVec
	// usage is the usage watchdog's collector; nil: no watchdog runs.
	usage prometheus.Collector
	// limitHook counts the limit hook's failure records; nil: the hook leaves none.
	limitHook prometheus.Collector
}

func newMetrics() *metrics {
	m := &metrics{
		prepared: prometheus.NewCounter(prometheus.CounterOpts{Name: "gpushare_dra_claims_prepared_total",
			Help: "Claims this plugin prepared (a claim kubelet asks again counts again)."}),
		prepareFailed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpushare_dra_claim_prepare_failures_total",
			Help: "Claims this plugin failed to prepare, by reason."}, []string{"reason"}),
		unprepared: prometheus.NewCounter(prometheus.CounterOpts{Name: "gpushare_dra_claims_unprepared_total",
			Help: "Claims this plugin unprepared, including claims it no longer held."}),
		unprepareFailed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpushare_dra_claim_unprepare_failures_total",
			Help: "Claims this plugin failed to unprepare, by reason."}, []string{"reason"}),
	}
	// Every reason from the start, so a rate over a first failure is not lost.
	for _, r := range prepareReasons {
		m.prepareFailed.WithLabelValues(r)
	}
	for _, r := range unprepareReasons {
		m.unprepareFailed.WithLabelValues(r)
	}
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	cs := []prometheus.Collector{m.prepared, m.prepareFailed, m.unprepared, m.unprepareFailed}
	if m.usage != nil {
		cs = append(cs, m.usage)
	}
	if m.limitHook != nil {
		cs = append(cs, m.limitHook)
	}
	return cs
}

// cardCollector computes the per-card gauges at scrape time from the driver's prepared
// claims and the cards' health, so there is no state to keep in sync.
type cardCollector struct {
	driver                                               *Driver
	health                                               *probes
	units, healthy, claims, bytes, registered, published *prometheus.Desc
}

func newCardCollector(d *Driver, h *probes) *cardCollector {
	labels := []string{"node", "index", "uuid", "model"}
	return &cardCollector{
		driver: d, health: h,
		// The device plugin's names for what both back ends publish, so one dashboard shows both.
		units:   prometheus.NewDesc("gpushare_card_units", "gpu-mem units of the card.", labels, nil),
		healthy: prometheus.NewDesc("gpushare_card_healthy", "1 when the card takes new pods, 0 after a critical XID until the quiet period passes.", labels, nil),
		claims:  prometheus.NewDesc("gpushare_dra_card_prepared_claims", "Claims prepared on the card by this DRA plugin.", labels, nil),
		bytes:   prometheus.NewDesc("gpushare_dra_card_prepared_memory_bytes", "GPU memory the claims prepared on the card hold, in bytes (whole units).", labels, nil),
		registered: prometheus.NewDesc("gpushare_dra_plugin_registered",
			"1 once kubelet has registered the DRA plugin and its server runs.", []string{"node"}, nil),
		published: prometheus.NewDesc("gpushare_dra_slice_published",
			"1 once the node's ResourceSlice has been handed to the slice controller.", []string{"node"}, nil),
	}
}

func (c *cardCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.units, c.healthy, c.claims, c.bytes, c.registered, c.published} {
		ch <- d
	}
}

func (c *cardCollector) Collect(ch chan<- prometheus.Metric) {
	d := c.driver
	node := d.cfg.NodeName
	claims, units := d.preparedByCard()
	unit := float64(unitBytes(d.cfg.Inventory.Unit))
	for _, card := range d.cfg.Inventory.Devices {
		l := []string{node, strconv.Itoa(card.Index), card.UUID, card.Model}
		ch <- prometheus.MustNewConstMetric(c.units, prometheus.GaugeValue, float64(card.Units), l...)
		ch <- prometheus.MustNewConstMetric(c.healthy, prometheus.GaugeValue, boolFloat(d.healthy(card.UUID)), l...)
		ch <- prometheus.MustNewConstMetric(c.claims, prometheus.GaugeValue, float64(claims[card.Index]), l...)
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(units[card.Index])*unit, l...)
	}
	ch <- prometheus.MustNewConstMetric(c.registered, prometheus.GaugeValue, boolFloat(c.health.registered()), node)
	ch <- prometheus.MustNewConstMetric(c.published, prometheus.GaugeValue, boolFloat(c.health.published.Load()), node)
}

// preparedByCard is, by card index, how many prepared claims hold part of the card and how
// many units they hold.
func (d *Driver) preparedByCard() (claims map[int]int, units map[int]int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	claims, units = map[int]int{}, map[int]int64{}
	for _, p := range d.prepared {
		seen := map[int]bool{}
		for _, dev := range p.Devices {
			units[dev.CardIndex] += dev.Units
			if !seen[dev.CardIndex] {
				seen[dev.CardIndex] = true
				claims[dev.CardIndex]++
			}
		}
	}
	return claims, units
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
