//go:build linux && !nocuda

package cuda

import (
	"errors"
	"testing"

	"github.com/gpushare/gpushare/pkg/probe"
)

func TestFormatUUID(t *testing.T) {
	b := [16]byte{0x8f, 0x2e, 0x1c, 0x45, 0x01, 0x02, 0xab, 0xcd, 0xef, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66}
	if got, want := formatUUID(b), "GPU-8f2e1c45-0102-abcd-ef00-112233445566"; got != want {
		t.Errorf("formatUUID = %s, want %s", got, want)
	}
	if got := cString([]byte("Tesla T4\x00junk")); got != "Tesla T4" {
		t.Errorf("cString = %q", got)
	}
}

// TestOpenNotCUDA: a library without CUDA's entry points (the C library) is ErrNoDriver.
func TestOpenNotCUDA(t *testing.T) {
	if _, err := Open("libc.so.6"); !errors.Is(err, probe.ErrNoDriver) {
		t.Fatalf("Open(libc.so.6) = %v; want ErrNoDriver", err)
	}
}
