package dra

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// CheckpointFile is the checkpoint's file name in the plugin's data folder.
const CheckpointFile = "gpushare-dra-checkpoint.json"

// checkpointVersion is the format written; a file of another version is refused, not
// guessed at.
const checkpointVersion = 1

// PreparedClaim is what the plugin remembers of a prepared claim: enough to answer a
// repeated prepare with the same devices, to rewrite the claim's CDI spec and to count
// what the node's cards have handed out, after a restart too.
type PreparedClaim struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// CDIDeviceID is the claim's CDI device (gpushare.io/claim=<UID>).
	CDIDeviceID string `json:"cdiDeviceID"`
	// RuntimeCDIDevices are the runtime's own devices of the claim's cards (<kind>=<UUID>),
	// handed over before CDIDeviceID; the claim's spec leaves those cards' device nodes out.
	RuntimeCDIDevices []string `json:"runtimeCDIDevices,omitempty"`
	// Devices are the claim's allocation results of this driver, in the claim's order.
	Devices []PreparedDevice `json:"devices"`
	// Limit: the claim's spec holds each container to the claim's memory per card with
	// gpushare-limit-hook (a node labelled gpushare.IsolationLimit when it was prepared).
	Limit bool `json:"limit,omitempty"`
	// PodUID is the pod the claim was prepared for, its first consumer that is a pod (empty:
	// none, on a node without limits only). A limit claim's spec serves this pod only, and
	// limits the pod to the claims prepared for it (podGrant).
	PodUID types.UID `json:"podUID,omitempty"`
}

// PreparedDevice is one allocation result of a prepared claim.
type PreparedDevice struct {
	Request string     `json:"request"`
	Pool    string     `json:"pool"`
	Device  string     `json:"device"`
	ShareID *types.UID `json:"shareID,omitempty"`
	// CardIndex and CardUUID name the card the device is.
	CardIndex int    `json:"cardIndex"`
	CardUUID  string `json:"cardUUID"`
	// Units is the card memory this result consumes, in units of the checkpoint's
	// UnitMiB.
	Units int64 `json:"units"`
}

// checkpoint is the file's JSON content.
type checkpoint struct {
	Version int `json:"version"`
	// UnitMiB is the size in MiB of the unit every PreparedDevice.Units counts in: the
	// --memory-unit of the process that wrote the file. 0: not recorded (a file written
	// before the unit was), so the claims' unit is unknown.
	UnitMiB int64                       `json:"unitMiB,omitempty"`
	Claims  map[types.UID]PreparedClaim `json:"claims"`
}

// loadCheckpoint reads the prepared claims from path and the unit they count in (MiB per
// unit; 0: the file does not record it). A missing file is no claims (a first start), in no
// recorded unit. Errors: a file that cannot be read, is not valid JSON or is of another
// version: the plugin must not start as if nothing were prepared, or it would hand the same
// memory out twice.
func loadCheckpoint(path string) (claims map[types.UID]PreparedClaim, unitMiB int64, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[types.UID]PreparedClaim{}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("reading the checkpoint: %w", err)
	}
	var c checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, 0, fmt.Errorf("checkpoint %s is corrupt (remove it only once no pod with a claim of this driver runs on the node): %w", path, err)
	}
	if c.Version != checkpointVersion {
		return nil, 0, fmt.Errorf("checkpoint %s has version %d, this plugin reads version %d", path, c.Version, checkpointVersion)
	}
	if c.Claims == nil {
		c.Claims = map[types.UID]PreparedClaim{}
	}
	return c.Claims, c.UnitMiB, nil
}

// saveCheckpoint replaces the checkpoint at path with claims, whose units count in unit:
// written to a temporary file, synced and renamed, so a crash leaves the old file or the
// new one, never half of one.
func saveCheckpoint(path string, unit gpushare.Unit, claims map[types.UID]PreparedClaim) error {
	b, err := json.Marshal(checkpoint{Version: checkpointVersion, UnitMiB: unitMiB(unit), Claims: claims})
	if err != nil {
		return fmt.Errorf("encoding the checkpoint: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("creating the checkpoint's folder: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing the checkpoint: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // gone after the rename; left only on failure
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing the checkpoint: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing the checkpoint: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the checkpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing the checkpoint: %w", err)
	}
	return nil
}
