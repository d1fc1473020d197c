//go:build !cgo

package limithook

import (
	"context"
	"errors"

	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// errNoCgo: go-nvml needs cgo; a CGO_ENABLED=0 hook handles simulated cards only.
var errNoCgo = errors.New("this gpushare-limit-hook was built with CGO_ENABLED=0: only --mode=simulated works; real NVML needs a cgo build")

// NVMLSetter is unavailable without cgo.
type NVMLSetter struct{}

// AcceptsV1 is false.
func (NVMLSetter) AcceptsV1() bool { return false }

// Callee is NVML's limit call.
func (NVMLSetter) Callee() (who, call string) { return "NVML", gpunvml.LimitCall }

// SetLimit fails (ReasonUnsupported): no NVML without cgo.
func (NVMLSetter) SetLimit(context.Context, string, Cgroup, Limit) error {
	return failed(ReasonUnsupported, "", errNoCgo)
}

// OpenNVML fails (ReasonUnsupported): no NVML without cgo.
func OpenNVML(string, string) (NVMLSetter, func(), error) {
	return NVMLSetter{}, nil, failed(ReasonUnsupported, "", errNoCgo)
}

// SystemSupport fails: no NVML without cgo.
func SystemSupport(string, string, []string) error { return errNoCgo }
