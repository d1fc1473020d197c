package nodecards

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	oci "github.com/opencontainers/runtime-spec/specs-go"
	cdicache "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

var simCards = []gpushare.Device{
	{Index: 0, UUID: "GPU-00000000-0000-0000-0000-000000000000", Model: "Tesla T4", MemoryMiB: 15079, Units: 14},
	{Index: 1, UUID: "GPU-11111111-1111-1111-1111-111111111111", Model: "Tesla T4", MemoryMiB: 15079, Units: 14},
}

// TestWriteSimulatedCDISpec: the written spec is one the CDI library (the one container
// runtimes use) loads without error, and injecting a card by the name Allocate returns
// bind-mounts that card's file, and only that card's, into the container.
func TestWriteSimulatedCDISpec(t *testing.T) {
	dir := t.TempDir()
	if _, err := WriteSimulatedCDISpec(dir, DefaultCDIKind, simCards); err != nil {
		t.Fatal(err)
	}
	cache, err := cdicache.NewCache(cdicache.WithSpecDirs(dir), cdicache.WithAutoRefresh(false))
	if err != nil {
		t.Fatalf("loading the spec: %v", err)
	}
	if errs := cache.GetErrors(); len(errs) > 0 {
		t.Fatalf("CDI errors: %v", errs)
	}
	want := []string{DefaultCDIKind + "=" + simCards[0].UUID, DefaultCDIKind + "=" + simCards[1].UUID}
	if d := cmp.Diff(want, cache.ListDevices()); d != "" {
		t.Errorf("devices (-want,+got):\n%s", d)
	}
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if unresolved, err := cache.InjectDevices(spec, want[1]); err != nil {
		t.Fatalf("injecting %s: %v (unresolved %v)", want[1], err, unresolved)
	}
	if len(spec.Mounts) != 1 || spec.Mounts[0].Destination != gpushare.SimulatedGPUDir+"/"+simCards[1].UUID {
		t.Fatalf("mounts %+v, want the file of card 1 only", spec.Mounts)
	}
	b, err := os.ReadFile(spec.Mounts[0].Source)
	if err != nil {
		t.Fatal(err)
	}
	var got simulatedCard
	if err := json.Unmarshal(b, &got); err != nil || got.UUID != simCards[1].UUID || got.Index != 1 || got.MemoryMiB != 15079 {
		t.Errorf("card file %s = %q (%v), want card 1", spec.Mounts[0].Source, b, err)
	}
	if !strings.Contains(strings.Join(spec.Mounts[0].Options, ","), "ro") {
		t.Errorf("card file mounted %v, want read-only", spec.Mounts[0].Options)
	}
	// Rewriting (a restart) replaces the files in place.
	if _, err := WriteSimulatedCDISpec(dir, DefaultCDIKind, simCards[:1]); err != nil {
		t.Fatalf("rewriting: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(m) > 0 {
		t.Errorf("temporary files left: %v", m)
	}
}

func TestSimulatedCDISpecRejects(t *testing.T) {
	bad := []gpushare.Device{{Index: 0, UUID: "GPU-1/../../etc", MemoryMiB: 15079}}
	for _, tc := range []struct {
		name  string
		kind  string
		cards []gpushare.Device
	}{
		{"no class", "nvidia.com", simCards},
		{"empty vendor", "/gpu", simCards},
		{"bad class", "nvidia.com/g=pu", simCards},
		{"path in UUID", DefaultCDIKind, bad},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := simulatedCDISpec(tc.kind, t.TempDir(), tc.cards); err == nil {
				t.Errorf("simulatedCDISpec(%q) accepted it", tc.kind)
			}
			if _, err := WriteSimulatedCDISpec(t.TempDir(), tc.kind, tc.cards); err == nil {
				t.Errorf("WriteSimulatedCDISpec(%q) accepted it", tc.kind)
			}
		})
	}
}
