package cuda

import (
	"errors"
	"testing"

	"github.com/gpushare/gpushare/pkg/probe"
)

// TestOpenWithoutDriver: a library that is not there is probe.ErrNoDriver, on every build.
func TestOpenWithoutDriver(t *testing.T) {
	d, err := Open("/nonexistent/libcuda.so.1")
	if !errors.Is(err, probe.ErrNoDriver) || d != nil {
		t.Fatalf("Open = %v, %v; want ErrNoDriver", d, err)
	}
}
