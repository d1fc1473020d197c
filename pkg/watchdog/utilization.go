package watchdog

import (
	"errors"

	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// addUtilization charges each process's SM utilisation on card since the last sample
// (Config.Utilization) to the container owners maps its PID to (the containers the sample
// charged the card's listed processes to); a process that owners lacks (of no GPU-sharing
// pod, or gone since the listing) is not charged. On success the card's containers have a
// figure in the sample, 0 for those without samples (NVML keeps none for a process that ran
// no kernel). The watchdog does not call it on an MPS node: NVML reports only the MPS server
// there. A card that does not report utilisation is logged once; a failure once per streak.
func (w *Watchdog) addUtilization(s *usageSample, card gpushare.Device, owners map[uint32]usageKey) {
	util, err := w.cfg.Utilization(card.Index)
	switch {
	case errors.Is(err, gpunvml.ErrUtilizationUnsupported):
		if !w.utilUnsupported[card.Index] {
			klog.InfoS("The card does not report per-process utilisation; its containers get no SM utilisation metrics", "index", card.Index, "reason", err)
		}
		w.utilUnsupported[card.Index] = true
		return
	case err != nil:
		if !w.utilFailing[card.Index] {
			klog.ErrorS(err, "Reading a card's per-process utilisation failed; its containers get no SM utilisation metrics until it answers", "index", card.Index)
		}
		w.utilFailing[card.Index] = true
		return
	}
	if w.utilFailing[card.Index] {
		klog.InfoS("Reading a card's per-process utilisation works again", "index", card.Index)
	}
	delete(w.utilFailing, card.Index)
	s.utilRead[card.Index] = true
	for _, u := range util {
		if k, ok := owners[u.PID]; ok {
			s.ctrs[k].smPercent += uint64(u.SMPercent)
		}
	}
}

// smRatio is the container's SM utilisation on its card, 0..1: the sum of its processes'
// percentages, capped at the whole card.
func (u *ctrUsage) smRatio() float64 { return min(float64(u.smPercent)/100, 1) }

// perShare is smRatio divided by the container's share of the card, its grant over the
// card's memory (memory stands in for a compute share, which grants do not carry); false
// when there is no share to divide by (no grant on the card, or its memory is unknown).
func (u *ctrUsage) perShare() (float64, bool) {
	if u.granted == 0 || u.card.MemoryMiB <= 0 {
		return 0, false
	}
	return u.smRatio() / (float64(u.granted) / float64(uint64(u.card.MemoryMiB)<<20)), true
}
