package preflight

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/BurntSushi/toml"
)

// DefaultNVIDIAConfigPath is where the NVIDIA container toolkit (nvidia-container-runtime,
// its hook and nvidia-ctk) reads its configuration unless NVIDIA_CTK_CONFIG_FILE_PATH or
// XDG_CONFIG_HOME point elsewhere.
const DefaultNVIDIAConfigPath = "/etc/nvidia-container-runtime/config.toml"

// maxConfigBytes bounds what is read of the file: the toolkit's own is about 2 KiB.
const maxConfigBytes = 1 << 20

// NVIDIAConfig is what this package needs of the toolkit's config.toml. A nil field is a key
// the file does not set; the toolkit then applies its default (api/config/v1 GetDefault in
// NVIDIA/nvidia-container-toolkit).
type NVIDIAConfig struct {
	// AcceptEnvvarUnprivileged: whether the runtime honours NVIDIA_VISIBLE_DEVICES (and the
	// other device-request variables) of an unprivileged container. Default true.
	AcceptEnvvarUnprivileged *bool `toml:"accept-nvidia-visible-devices-envvar-when-unprivileged"`
	// AcceptVolumeMounts: whether a container may request devices by mounting the host's
	// /dev/null under /var/run/nvidia-container-devices. Default false.
	AcceptVolumeMounts *bool `toml:"accept-nvidia-visible-devices-as-volume-mounts"`
	Runtime            struct {
		// Mode: auto (default), legacy, cdi, csv or jit-cdi.
		Mode *string `toml:"mode"`
	} `toml:"nvidia-container-runtime"`
}

// ErrNoConfig: the node has no configuration file at the path (no NVIDIA container toolkit,
// simulated GPUs, or a toolkit configured elsewhere).
var ErrNoConfig = errors.New("no NVIDIA container runtime configuration")

// ReadNVIDIAConfig reads the toolkit's configuration at path. Keys this package does not
// use are ignored. Errors: ErrNoConfig (wrapped) when there is no file, a file over 1 MiB,
// TOML that does not parse or a known key of the wrong type.
func ReadNVIDIAConfig(path string) (NVIDIAConfig, error) {
	var c NVIDIAConfig
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, fmt.Errorf("%w at %s", ErrNoConfig, path)
	}
	if err != nil {
		return c, fmt.Errorf("opening the NVIDIA container runtime configuration: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return c, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(b) > maxConfigBytes {
		return c, fmt.Errorf("%s is over %d bytes", path, maxConfigBytes)
	}
	if _, err := toml.Decode(string(b), &c); err != nil {
		return NVIDIAConfig{}, fmt.Errorf("parsing %s: %w", path, err)
	}
	return c, nil
}
