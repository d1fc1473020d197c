package dra

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"

	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/nodecards"
)

// reconcileSpecs makes the claims' CDI specs agree with the checkpoint at start. Prepare
// writes a claim's spec before its checkpoint entry, so a crash in between leaves a spec
// without an entry: a device that still resolves for memory nothing counts. Unprepare
// removes the spec before the entry, and a runtime's folder may lose files, so an entry can
// be left without a spec: the claim's containers could not be created again. A spec whose
// claim the checkpoint does not hold is removed; an entry whose spec is missing has it
// written again from the checkpoint, as a repeated prepare would (an unprepare cut short is
// repeated by kubelet and removes both). Pairs of entry and spec are left as they are.
// Called before the driver serves, so no prepare runs beside it.
//
// Errors: the spec folder cannot be listed, or a leftover spec cannot be removed (the
// plugin could then write no spec either). A spec that cannot be written again is only
// logged: the claim's next prepare fails with the reason, while failing the start would
// also stop the node's other claims from being unprepared.
func (d *Driver) reconcileSpecs() error {
	dir := d.cfg.Specs.Dir
	uids, err := nodecards.ClaimSpecUIDs(dir)
	if err != nil {
		return fmt.Errorf("reconciling the claims' CDI specs with the checkpoint: %w", err)
	}
	for _, uid := range uids {
		if _, ok := d.prepared[uid]; ok {
			continue
		}
		if err := nodecards.RemoveClaimSpec(dir, uid); err != nil {
			return fmt.Errorf("reconciling the claims' CDI specs with the checkpoint: %w", err)
		}
		klog.InfoS("Removed the CDI spec of a claim the checkpoint does not hold (left by a prepare or unprepare cut short)", "claimUID", uid, "path", nodecards.ClaimSpecPath(dir, uid))
	}
	for _, uid := range slices.Sorted(maps.Keys(d.prepared)) {
		path := nodecards.ClaimSpecPath(dir, uid)
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			continue // there, or unreadable: a repeated prepare rewrites it either way
		}
		p := d.prepared[uid]
		if _, err := d.writeSpec(uid, p.Devices, p.Limit, p.RuntimeCDIDevices, d.podGrant(p.PodUID, nil)); err != nil {
			klog.ErrorS(err, "A prepared claim's CDI spec is missing and could not be written again", "claim", klog.KRef(p.Namespace, p.Name), "claimUID", uid)
			continue
		}
		klog.InfoS("Wrote again the missing CDI spec of a prepared claim", "claim", klog.KRef(p.Namespace, p.Name), "claimUID", uid, "path", path)
	}
	return nil
}
