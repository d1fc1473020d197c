package probe

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

const (
	uuidA = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
	uuidB = "GPU-bbbbbbbb-0000-0000-0000-000000000000"
)

// t4 is a 15 GiB card with 15000 MiB free whose driver refuses beyond limit MiB.
func t4(uuid string, mps MPSState, limit int64) (Device, int64, int64) {
	return Device{UUID: uuid, Name: "Tesla T4", TotalMiB: 15360, MPS: mps}, 15000, limit
}

func oneCard(uuid string, mps MPSState, limit int64) *fakeDriver {
	d, free, l := t4(uuid, mps, limit)
	return &fakeDriver{devs: []Device{d}, free: []int64{free}, limitMiB: []int64{l}}
}

// granted is the Sight of a container granted 2 GiB of card uuidA through the environment.
func granted() Sight {
	return Sight{VisibleDevices: uuidA, VisibleSet: true, GrantUnits: 2, HasGrant: true}
}

func TestRun(t *testing.T) {
	gib := gpushare.GiB
	mpsSight := granted()
	mpsSight.MPSPipeDir = "/run/gpushare/mps/" + uuidA + "/pipe"
	tests := []struct {
		name    string
		cfg     Config
		sight   Sight
		driver  *fakeDriver // nil: no libcuda
		want    Verdict
		checks  map[string]Verdict
		detail  string // in some check's detail
		alloc   int64  // AllocatedMiB of the first measurement, when measured
		mustRun bool
	}{
		{
			name: "limit holds at the grant", cfg: Config{Promise: gpushare.IsolationLimit, Unit: gib, ExpectCards: 1},
			sight: granted(), driver: oneCard(uuidA, MPSNo, 1900), want: VerdictEnforced,
			checks: map[string]Verdict{CheckCards: VerdictEnforced, CheckMemory: VerdictEnforced}, detail: "refused beyond 1792 MiB, grant 2048 MiB", alloc: 1792,
		},
		{
			name: "limit promised, whole card reachable", cfg: Config{Promise: gpushare.IsolationLimit, Unit: gib, ExpectCards: 1},
			sight: granted(), driver: oneCard(uuidA, MPSNo, 15000), want: VerdictNotEnforced,
			checks: map[string]Verdict{CheckMemory: VerdictNotEnforced}, detail: "allocated 4096 MiB, grant 2048 MiB", alloc: 4096,
		},
		{
			name: "card full of neighbours", cfg: Config{Promise: gpushare.IsolationLimit, Unit: gib, ExpectCards: 1},
			sight: granted(), driver: &fakeDriver{devs: []Device{{UUID: uuidA, TotalMiB: 15360}}, free: []int64{1100}, limitMiB: []int64{1100}},
			want: VerdictCannotVerify, checks: map[string]Verdict{CheckMemory: VerdictCannotVerify}, detail: "the card may be full",
		},
		{
			name: "driver reports the limit as the card's size", cfg: Config{Promise: gpushare.IsolationMPS, Unit: gib, ExpectCards: 1},
			sight: mpsSight, driver: &fakeDriver{devs: []Device{{UUID: uuidA, TotalMiB: 2048, MPS: MPSYes}}, free: []int64{1700}, limitMiB: []int64{1700}},
			want: VerdictEnforced, checks: map[string]Verdict{CheckMPS: VerdictEnforced, CheckMemory: VerdictEnforced},
		},
		{
			name: "mps promised, driver runs without", cfg: Config{Promise: gpushare.IsolationMPS, Unit: gib, ExpectCards: 1},
			sight: mpsSight, driver: oneCard(uuidA, MPSNo, 1900), want: VerdictNotEnforced,
			checks: map[string]Verdict{CheckMPS: VerdictNotEnforced, CheckMemory: VerdictEnforced},
		},
		{
			name: "mps promised, simulated card with the variables", cfg: Config{Promise: gpushare.IsolationMPS, Unit: gib, ExpectCards: 1},
			sight: mpsSight, want: VerdictCannotVerify,
			checks: map[string]Verdict{CheckCards: VerdictEnforced, CheckMPS: VerdictCannotVerify, CheckMemory: VerdictCannotVerify},
		},
		{
			name: "mps promised, no pipe folder", cfg: Config{Promise: gpushare.IsolationMPS, Unit: gib, ExpectCards: 1},
			sight: granted(), want: VerdictNotEnforced, checks: map[string]Verdict{CheckMPS: VerdictNotEnforced}, detail: "no CUDA_MPS_PIPE_DIRECTORY",
		},
		{
			name: "none: measured up to the grant only", cfg: Config{Promise: gpushare.IsolationNone, Unit: gib, ExpectCards: 1},
			sight: granted(), driver: oneCard(uuidA, MPSNo, 15000), want: VerdictEnforced,
			checks: map[string]Verdict{CheckMemory: VerdictEnforced}, detail: "no limit promised", alloc: 2048,
		},
		{
			name: "simulated card through the environment", cfg: Config{Promise: gpushare.IsolationNone, Unit: gib, ExpectCards: 1},
			sight: granted(), want: VerdictCannotVerify,
			checks: map[string]Verdict{CheckCards: VerdictEnforced, CheckMemory: VerdictCannotVerify}, detail: "not found",
		},
		{
			name: "simulated card through files", cfg: Config{Unit: gib, ExpectCards: 1},
			sight: Sight{SimulatedCards: []string{uuidA}, GrantUnits: 2, HasGrant: true}, want: VerdictCannotVerify,
			checks: map[string]Verdict{CheckCards: VerdictEnforced},
		},
		{
			name: "CUDA shows a card the environment does not name", cfg: Config{Promise: gpushare.IsolationLimit, Unit: gib, ExpectCards: 1},
			sight: granted(), driver: func() *fakeDriver {
				d := oneCard(uuidA, MPSNo, 1900)
				b, free, limit := t4(uuidB, MPSNo, 1900)
				d.devs, d.free, d.limitMiB = append(d.devs, b), append(d.free, free), append(d.limitMiB, limit)
				return d
			}(), want: VerdictNotEnforced, checks: map[string]Verdict{CheckCards: VerdictNotEnforced}, detail: uuidB,
		},
		{
			name: "NVIDIA_VISIBLE_DEVICES=all", cfg: Config{Unit: gib, ExpectCards: 1},
			sight: Sight{VisibleDevices: "all", VisibleSet: true, GrantUnits: 2, HasGrant: true}, want: VerdictNotEnforced,
			checks: map[string]Verdict{CheckCards: VerdictNotEnforced},
		},
		{
			name: "granted container sees nothing", cfg: Config{Unit: gib, ExpectCards: 1},
			sight: Sight{GrantUnits: 2, HasGrant: true}, want: VerdictCannotVerify, checks: map[string]Verdict{CheckCards: VerdictCannotVerify},
		},
		{
			name: "sibling sees no card", cfg: Config{Promise: gpushare.IsolationLimit, Unit: gib},
			sight: Sight{}, want: VerdictEnforced, checks: map[string]Verdict{CheckCards: VerdictEnforced},
		},
		{
			name: "sibling with a simulated card's file", cfg: Config{Unit: gib},
			sight: Sight{SimulatedCards: []string{uuidA}}, want: VerdictNotEnforced, checks: map[string]Verdict{CheckCards: VerdictNotEnforced},
		},
		{
			name: "sibling with a device node", cfg: Config{Unit: gib},
			sight: Sight{DeviceNodes: []string{"/dev/nvidia0"}}, want: VerdictNotEnforced, detail: "/dev/nvidia0",
		},
		{
			name: "sibling that CUDA gives a card", cfg: Config{Unit: gib},
			sight: Sight{}, driver: oneCard(uuidA, MPSNo, 15000), want: VerdictNotEnforced, checks: map[string]Verdict{CheckCards: VerdictNotEnforced},
		},
		{
			name: "no grant variable", cfg: Config{Promise: gpushare.IsolationLimit, Unit: gib, ExpectCards: 1},
			sight: Sight{VisibleDevices: uuidA, VisibleSet: true}, driver: oneCard(uuidA, MPSNo, 15000), want: VerdictCannotVerify,
			checks: map[string]Verdict{CheckMemory: VerdictCannotVerify}, detail: "grant unknown",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			openDriver := noDriver
			if tc.driver != nil {
				openDriver = open(tc.driver)
			}
			r := Run(tc.cfg, tc.sight, openDriver)
			if r.Verdict != tc.want {
				t.Errorf("verdict %q, want %q: %s", r.Verdict, tc.want, r.Line())
			}
			got := map[string]Verdict{}
			var details []string
			for _, c := range r.Checks {
				got[c.Name] = c.Verdict
				details = append(details, c.Detail)
			}
			for name, want := range tc.checks {
				if got[name] != want {
					t.Errorf("check %s: %q, want %q: %s", name, got[name], want, r.Line())
				}
			}
			if tc.detail != "" && !strings.Contains(strings.Join(details, "\n"), tc.detail) {
				t.Errorf("no check says %q: %s", tc.detail, r.Line())
			}
			if tc.alloc != 0 && (len(r.Measurements) == 0 || r.Measurements[0].AllocatedMiB != tc.alloc) {
				t.Errorf("measurements %+v, want %d MiB allocated", r.Measurements, tc.alloc)
			}
			if tc.driver != nil {
				tc.driver.leaked(t)
			}
			if r.Verdict.ExitCode() != map[Verdict]int{VerdictEnforced: 0, VerdictNotEnforced: 1, VerdictCannotVerify: 2}[tc.want] {
				t.Errorf("exit code %d for %q", r.Verdict.ExitCode(), r.Verdict)
			}
		})
	}
}

// TestMeasureBounded: allocation stops at the bound in quarter-unit steps and frees every
// block, also when the driver fails midway.
func TestMeasureBounded(t *testing.T) {
	d := oneCard(uuidA, MPSNo, 15000)
	m := measure(d, 0, uuidA, 1000, 256)
	if m.AllocatedMiB != 1000 || m.OutOfMemory || m.Err != "" {
		t.Errorf("measure = %+v, want 1000 MiB without a refusal", m)
	}
	d.leaked(t)
	if d.next != 4 {
		t.Errorf("%d blocks, want 4 (256, 256, 256, 232)", d.next)
	}
	failing := oneCard(uuidA, MPSNo, 15000)
	failing.allocErr = errString("CUresult 999")
	if m := measure(failing, 0, uuidA, 1000, 256); !strings.Contains(m.Err, "CUresult 999") {
		t.Errorf("measure with a failing driver = %+v", m)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// TestLook reads a container's environment and files.
func TestLook(t *testing.T) {
	env := map[string]string{
		gpushare.EnvVisibleDevices: uuidA + "," + uuidB, gpushare.EnvContainerUnits: "3",
		gpushare.EnvMPSPipeDirectory: "/pipe", gpushare.EnvMPSPinnedMemLimit: "0=3072M",
	}
	root := fstest.MapFS{
		"run/gpushare/simulated-gpus/" + uuidB: {Data: []byte("{}")},
		"dev/nvidia0":                          {}, "dev/nvidiactl": {}, "dev/nvidia-uvm": {}, "dev/nvidia12": {},
	}
	s := Look(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, root)
	if got := strings.Join(s.VisibleUUIDs(), ","); got != uuidA+","+uuidB {
		t.Errorf("VisibleUUIDs = %s", got)
	}
	if !s.HasGrant || s.GrantUnits != 3 || s.MPSPipeDir != "/pipe" || s.MPSLimit != "0=3072M" {
		t.Errorf("Look = %+v", s)
	}
	if got := strings.Join(s.DeviceNodes, ","); got != "/dev/nvidia0,/dev/nvidia12" {
		t.Errorf("DeviceNodes = %s", got)
	}
	if got := strings.Join(s.SimulatedCards, ","); got != uuidB {
		t.Errorf("SimulatedCards = %s", got)
	}
	if h := s.Handover(); h != "env+files+devices" {
		t.Errorf("Handover = %s", h)
	}
	empty := Look(func(string) (string, bool) { return "", false }, fstest.MapFS{})
	if empty.Handover() != "none" || empty.HasGrant || len(empty.DeviceNodes) != 0 {
		t.Errorf("Look of an empty container = %+v", empty)
	}
	for _, v := range []string{"", "none", "void"} {
		if u := (Sight{VisibleDevices: v}).VisibleUUIDs(); len(u) != 0 {
			t.Errorf("VisibleUUIDs(%q) = %v", v, u)
		}
	}
}

// TestResultRoundTrip: the JSON line ParseResult reads back from a log with other lines.
func TestResultRoundTrip(t *testing.T) {
	r := Run(Config{Unit: gpushare.GiB, ExpectCards: 1}, granted(), noDriver)
	line, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	log := "starting\n" + r.Line() + "\n{\"other\":1}\n" + line + "\n"
	got, err := ParseResult(log)
	if err != nil {
		t.Fatal(err)
	}
	if got.Verdict != r.Verdict || got.Role != RoleGranted || strings.Join(got.Seen, ",") != uuidA || len(got.Checks) != len(r.Checks) {
		t.Errorf("ParseResult = %+v, want %+v", got, r)
	}
	for _, bad := range []string{"", "no json here\n", `{"probe":"gpushare-probe","verdict":"maybe"}`} {
		if _, err := ParseResult(bad); err == nil {
			t.Errorf("ParseResult(%q) = nil error", bad)
		}
	}
}

func TestPromiseOf(t *testing.T) {
	tests := []struct {
		isolation, enforced string
		want                gpushare.Isolation
		wantErr             bool
	}{
		{"", "", gpushare.IsolationNone, false},
		{"mps", "", gpushare.IsolationMPS, false},
		{"limit", "none", gpushare.IsolationNone, false},
		{"MPS", "", "", true},
		{"mps", "Mps", "", true},
	}
	for _, tc := range tests {
		got, err := PromiseOf(tc.isolation, tc.enforced)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("PromiseOf(%q, %q) = %q, %v", tc.isolation, tc.enforced, got, err)
		}
	}
}
