//go:build linux && !nocuda

package cuda

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/probe"
)

// TestStubDriver loads testdata/stub_cuda.c, a stand-in for libcuda.so.1 built with gcc (the
// test skips without it), through purego, and runs the probe on it: the binding's types
// reach the C side intact (UUID bytes, name, sizes, the MPS attribute, context, allocation
// and its refusal), the verdict is enforced, and every block is freed.
func TestStubDriver(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc to build the stub driver")
	}
	lib := filepath.Join(t.TempDir(), "libcuda.so.1")
	if out, err := exec.Command(gcc, "-shared", "-fPIC", "-o", lib, "testdata/stub_cuda.c").CombinedOutput(); err != nil {
		t.Fatalf("building the stub driver: %v\n%s", err, out)
	}
	d, err := Open(lib)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	devs, err := d.Devices()
	if err != nil {
		t.Fatal(err)
	}
	want := probe.Device{UUID: "GPU-00112233-4455-6677-8899-aabbccddeeff", Name: "Stub T4", TotalMiB: 16384, MPS: probe.MPSYes}
	if len(devs) != 1 || devs[0] != want {
		t.Fatalf("Devices = %+v, want [%+v]", devs, want)
	}
	s := probe.Sight{VisibleDevices: want.UUID, VisibleSet: true, GrantUnits: 2, HasGrant: true, MPSPipeDir: "/pipe"}
	r := probe.Run(probe.Config{Promise: gpushare.IsolationMPS, Unit: gpushare.GiB, ExpectCards: 1}, s, func() (probe.Driver, error) { return d, nil })
	if r.Verdict != probe.VerdictEnforced {
		t.Errorf("verdict %s: %s", r.Verdict, r.Line())
	}
	if len(r.Measurements) != 1 || r.Measurements[0].AllocatedMiB != 2048 || !r.Measurements[0].OutOfMemory || r.Measurements[0].FreeMiB != 16000 {
		t.Errorf("measurements %+v, want 2048 MiB then a refusal, 16000 MiB free", r.Measurements)
	}
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Fatal(err)
	}
	var blocks func() int32
	purego.RegisterLibFunc(&blocks, h, "stub_blocks")
	if n := blocks(); n != 0 {
		t.Errorf("%d blocks still allocated in the driver", n)
	}
}
