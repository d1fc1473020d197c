package dra

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"
)

// preparedClaims returns a copy of the prepared claims, safe to read while prepare and
// unprepare go on.
func (d *Driver) preparedClaims() map[types.UID]PreparedClaim {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]PreparedClaim, len(d.prepared))
	for uid, p := range d.prepared {
		p.Devices = slices.Clone(p.Devices)
		out[uid] = p
	}
	return out
}
