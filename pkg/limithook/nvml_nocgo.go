//go:build !cgo

package limithook

import (
	"context"
	"errors"
)

// errNoCgo: go-nvml needs cgo; a CGO_ENABLED=0 hook handles simulated cards only.
var errNoCgo = errors.New("this gpushare-limit-hook was built with CGO_ENABLED=0: only --mode=simulated works; real NVML needs a cgo build")

// NVMLSetter is unavailable without cgo.
type NVMLSetter struct{}

// AcceptsV1 is false.
func (NVMLSetter) AcceptsV1() bool { return false }

// SetLimit fails: no NVML without cgo.
func (NVMLSetter) SetLimit(context.Context, string, Cgroup, Limit) error { return errNoCgo }

// OpenNVML fails: no NVML without cgo.
func OpenNVML(string, string) (NVMLSetter, func(), error) { return NVMLSetter{}, nil, errNoCgo }

// SystemSupport fails: no NVML without cgo.
func SystemSupport(string, string, []string) error { return errNoCgo }
