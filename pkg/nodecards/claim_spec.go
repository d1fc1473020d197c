package nodecards

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// claimCDIClass makes, with allocationCDIVendor, the kind of the DRA back end's per-claim
// devices, gpushare.io/claim: one device per prepared ResourceClaim, named by the claim's
// UID. A kind of its own keeps their files apart from the per-allocation specs, which the
// device plugin removes when no pod with their UID holds memory.
const claimCDIClass = "claim"

// ClaimCDIKind is the CDI kind of the per-claim devices, gpushare.io/claim.
const ClaimCDIKind = allocationCDIVendor + "/" + claimCDIClass

// claimSpecPrefix starts every per-claim spec file name: <prefix><claim UID>.json.
var claimSpecPrefix = cdiapi.GenerateTransientSpecName(allocationCDIVendor, claimCDIClass, "")

// WriteClaimSpec writes into s.Dir the CDI spec of the claim with uid: one device holding
// cards, as the per-allocation spec gives them, env and hooks (LimitHook on a limit node),
// and returns the qualified device ID to hand kubelet (gpushare.io/claim=<uid>). The file is
// validated with the CDI library's reader before it is renamed into place. Errors: a UID
// that is not letters, digits and '-', a real card without a minor number, or a file that
// cannot be written.
func (s CardSpecs) WriteClaimSpec(uid types.UID, cards []gpushare.Device, env map[string]string, hooks []*cdi.Hook) (string, error) {
	name, err := claimDeviceName(uid)
	if err != nil {
		return "", err
	}
	if err := s.writeDevice(ClaimSpecPath(s.Dir, uid), ClaimCDIKind, name, cards, env, hooks); err != nil {
		return "", err
	}
	return parser.QualifiedName(allocationCDIVendor, claimCDIClass, name), nil
}

// RemoveClaimSpec removes the CDI spec of the claim with uid from dir; one already gone is
// no error, so unpreparing twice is harmless.
func RemoveClaimSpec(dir string, uid types.UID) error {
	if err := os.Remove(ClaimSpecPath(dir, uid)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the CDI spec of claim %s: %w", uid, err)
	}
	return nil
}

// ClaimSpecPath is where the CDI spec of the claim with uid lives in dir.
func ClaimSpecPath(dir string, uid types.UID) string {
	return filepath.Join(dir, claimSpecPrefix+string(uid)+".json")
}

// ClaimSpecUIDs lists the claim UIDs whose CDI spec files are in dir (ClaimSpecPath), sorted.
// Other files are left out: other kinds' specs, and the temporary files of a write in
// progress, whose names start with a dot. A missing dir holds none. Errors: a dir that
// cannot be read.
func ClaimSpecUIDs(dir string) ([]types.UID, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the claims' CDI specs in %s: %w", dir, err)
	}
	var uids []types.UID
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), claimSpecPrefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		uid, ok := strings.CutSuffix(rest, ".json")
		if !ok {
			continue
		}
		if _, err := claimDeviceName(types.UID(uid)); err != nil {
			continue // not a name WriteClaimSpec gives
		}
		uids = append(uids, types.UID(uid))
	}
	slices.Sort(uids)
	return uids, nil
}

// claimDeviceName is the CDI device name of the claim with uid: the UID itself, which the
// API server makes a UUID. Errors: a UID the CDI naming rules or a file name cannot hold.
func claimDeviceName(uid types.UID) (string, error) {
	if _, err := allocationDeviceName(uid, "claim"); err != nil {
		return "", fmt.Errorf("claim UID: %w", err)
	}
	return string(uid), nil
}
