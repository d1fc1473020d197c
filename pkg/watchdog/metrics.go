package watchdog

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// usageCollector exports the watchdog's last sample. Built from the sample at scrape time,
// a container or pod that is gone leaves no series behind. Cards are labelled as in
// gpushare_plugin_card_served_units and the extender's per-card metrics: card is the NVML
// index, uuid the card's UUID (which gpushare_card_* carry too, for joins).
type usageCollector struct {
	w            *Watchdog
	used         *prometheus.Desc
	granted      *prometheus.Desc
	unattributed *prometheus.Desc
	unclaimed    *prometheus.Desc
	mpsServers   *prometheus.Desc
	sm           *prometheus.Desc
	smPerShare   *prometheus.Desc
}

// Collector exports the watchdog's figures: the over-grant and MPS escape counters and, from the last
// sample, each container's used and granted bytes per card and, off MPS nodes, its SM
// utilisation there, each card's unattributed bytes and each pod's bytes used per card
// without a grant.
func (w *Watchdog) Collector() prometheus.Collector { return newUsageCollector(w) }

func newUsageCollector(w *Watchdog) *usageCollector {
	ctr := []string{"node", "namespace", "pod", "container", "card", "uuid"}
	return &usageCollector{
		w: w,
		used: prometheus.NewDesc("gpushare_container_gpu_memory_used_bytes",
			"GPU memory the processes of a container use on a card, as NVML reports them (processes NVML cannot measure count 0).", ctr, nil),
		granted: prometheus.NewDesc("gpushare_container_gpu_memory_granted_bytes",
			"GPU memory a container was granted on a card: its gpu-mem units there times the memory unit (0: it uses a card it holds nothing on).", ctr, nil),
		// Absent on an MPS node (NVML reports only the MPS server there, not its clients) and
		// on a card that reports no per-process utilisation: absent, not a misleading 0.
		sm: prometheus.NewDesc("gpushare_container_gpu_sm_utilization_ratio",
			"Fraction of the last usage interval in which a container's kernels ran on a card's SMs, 0..1: the sum of its processes' SM utilisation as NVML reports it, capped at 1. Absent on nodes labelled gpushare.io/isolation=mps (NVML reports only the MPS server) and on cards that do not report per-process utilisation.", ctr, nil),
		smPerShare: prometheus.NewDesc("gpushare_container_gpu_sm_utilization_per_share_ratio",
			"A container's SM utilisation on a card divided by its share of the card, its granted memory over the card's memory (memory stands in for a compute share): 1 uses as much compute as memory share, above 1 more. Absent where the utilisation is, and for a container without a grant on the card.", ctr, nil),
		unattributed: prometheus.NewDesc("gpushare_card_unattributed_memory_used_bytes",
			"GPU memory used on a card by processes of no GPU-sharing pod of the node (host processes, pods that requested no gpu-mem, processes whose cgroup could not be read).",
			[]string{"node", "card", "uuid"}, nil),
		mpsServers: prometheus.NewDesc("gpushare_card_mps_server_memory_used_bytes",
			"GPU memory the MPS servers on a card use, on nodes labelled gpushare.io/isolation=mps: the overhead of the card's MPS daemons (one per distinct grant), outside every grant. Absent on other nodes.",
			[]string{"node", "card", "uuid"}, nil),
		// One series per pod and card with such use only, gone with the use: bounded by
		// what runs on the node.
		unclaimed: prometheus.NewDesc("gpushare_pod_unclaimed_gpu_memory_used_bytes",
			"GPU memory the processes of a pod use on a card none of its containers was granted (the pod requested no gpu-mem, or holds other cards): a container reached a card it was not handed. Present while such processes run (0 when NVML cannot measure them).",
			[]string{"node", "namespace", "pod", "card", "uuid"}, nil),
	}
}

func (c *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.used
	ch <- c.granted
	ch <- c.unattributed
	ch <- c.unclaimed
	ch <- c.mpsServers
	ch <- c.sm
	ch <- c.smPerShare
	c.w.overGrant.Describe(ch)
	c.w.mpsEscapes.Describe(ch)
}

func (c *usageCollector) Collect(ch chan<- prometheus.Metric) {
	c.w.overGrant.Collect(ch)
	c.w.mpsEscapes.Collect(ch)
	c.w.mu.Lock()
	s := c.w.last
	c.w.mu.Unlock()
	if s == nil {
		return
	}
	node := c.w.cfg.NodeName
	for _, u := range s.ctrs {
		l := []string{node, u.pod.Namespace, u.pod.Name, u.container, strconv.Itoa(u.card.Index), u.card.UUID}
		ch <- prometheus.MustNewConstMetric(c.granted, prometheus.GaugeValue, float64(u.granted), l...)
		if s.listed[u.card.Index] {
			ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(u.used), l...)
		}
		if s.utilRead[u.card.Index] {
			ch <- prometheus.MustNewConstMetric(c.sm, prometheus.GaugeValue, u.smRatio(), l...)
			if r, ok := u.perShare(); ok {
				ch <- prometheus.MustNewConstMetric(c.smPerShare, prometheus.GaugeValue, r, l...)
			}
		}
	}
	for _, card := range c.w.cfg.Cards {
		if s.listed[card.Index] {
			ch <- prometheus.MustNewConstMetric(c.unattributed, prometheus.GaugeValue, float64(s.unattributed[card.Index]),
				node, strconv.Itoa(card.Index), card.UUID)
		}
		if s.mps && s.listed[card.Index] {
			ch <- prometheus.MustNewConstMetric(c.mpsServers, prometheus.GaugeValue, float64(s.mpsServers[card.Index]),
				node, strconv.Itoa(card.Index), card.UUID)
		}
	}
	for _, u := range s.unclaimed {
		ch <- prometheus.MustNewConstMetric(c.unclaimed, prometheus.GaugeValue, float64(u.used),
			node, u.pod.Namespace, u.pod.Name, strconv.Itoa(u.card.Index), u.card.UUID)
	}
}
