//go:build cgo

package nvml

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ProcessUtilization reads nvmlDeviceGetProcessUtilization for card index since the newest
// sample the previous call for the card returned (0 at first: all the driver holds), and
// folds the samples per PID (meanByPID). NOT_FOUND (nothing since) is an empty answer;
// NOT_SUPPORTED or a library without the call is ErrUtilizationUnsupported.
func (c *Client) ProcessUtilization(index int) ([]ProcessUtilization, error) {
	h, ret := c.lib.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("getting NVML device %d: %v", index, ret)
	}
	c.utilMu.Lock()
	defer c.utilMu.Unlock()
	raw, ret := h.GetProcessUtilization(c.utilSince[index])
	switch {
	case ret == nvml.SUCCESS:
	// go-nvml answers a count of 0 to its sizing call as INSUFFICIENT_SIZE with no samples.
	case ret == nvml.ERROR_NOT_FOUND, ret == nvml.ERROR_INSUFFICIENT_SIZE && len(raw) == 0:
		return []ProcessUtilization{}, nil
	case ret == nvml.ERROR_NOT_SUPPORTED, ret == nvml.ERROR_FUNCTION_NOT_FOUND:
		return nil, fmt.Errorf("NVML device %d: %w (%v)", index, ErrUtilizationUnsupported, ret)
	default:
		return nil, fmt.Errorf("reading process utilisation of NVML device %d: %v", index, ret)
	}
	if c.utilSince == nil {
		c.utilSince = map[int]uint64{}
	}
	samples := make([]utilSample, 0, len(raw))
	for _, r := range raw {
		samples = append(samples, utilSample{pid: r.Pid, sm: r.SmUtil, mem: r.MemUtil})
		c.utilSince[index] = max(c.utilSince[index], r.TimeStamp)
	}
	return meanByPID(samples), nil
}
