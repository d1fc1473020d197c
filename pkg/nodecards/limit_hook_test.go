package nodecards

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/limithook"
)

// The entry carries the runtime's timeout, longer than the hook's own deadline, and the
// arguments the hook reads back: the deadline, the failure folder, each card's limit, and the
// pod's UID and limit on each of its cards, which may be more than the container's.
func TestLimitHook(t *testing.T) {
	cards := []gpushare.Device{{UUID: "GPU-a"}, {UUID: "GPU-b"}}
	pod := PodGrant{UID: "0b5c1f0e-8d1e-4f57-9a0c-6c1e2a3b4c5d", Cards: []gpushare.Device{{UUID: "GPU-a"}, {UUID: "GPU-b"}, {UUID: "GPU-c"}}, Units: []int64{5, 1, 3}}
	for _, tc := range []struct {
		name string
		c    LimitHookConfig
		mode limithook.Mode
	}{
		{name: "nvml", c: LimitHookConfig{Path: "/h", FailureDir: "/var/lib/gpushare/limit-hook-failures"}, mode: limithook.ModeNVML},
		{name: "simulated", c: LimitHookConfig{Path: "/h", SimulatedCardDir: "/cards", FailureDir: "/state/f"}, mode: limithook.ModeSimulated},
		{name: "no failure folder", c: LimitHookConfig{Path: "/h"}, mode: limithook.ModeNVML},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := LimitHook(tc.c, gpushare.GiB, cards, []int64{2, 1}, nil, pod)
			if h.HookName != cdiapi.CreateRuntimeHook || h.Path != "/h" || h.Args[0] != "/h" {
				t.Errorf("hook %+v, want a %s hook at /h", h, cdiapi.CreateRuntimeHook)
			}
			if h.Timeout == nil || *h.Timeout != 30 {
				t.Fatalf("timeout %v, want 30 (seconds)", h.Timeout)
			}
			a, err := limithook.ParseArgs(h.Args[1:])
			if err != nil {
				t.Fatal(err)
			}
			if a.Deadline != limithook.DefaultDeadline || a.Deadline >= time.Duration(*h.Timeout)*time.Second {
				t.Errorf("deadline %s, want %s, under the timeout of %ds", a.Deadline, limithook.DefaultDeadline, *h.Timeout)
			}
			want := limithook.Args{Mode: tc.mode, SimulatedCardDir: tc.c.SimulatedCardDir, ProcRoot: limithook.DefaultProcRoot, CgroupRoot: limithook.DefaultCgroupRoot,
				Deadline: limithook.DefaultDeadline, FailureDir: tc.c.FailureDir, Limits: []limithook.Limit{{UUID: "GPU-a", MiB: 2048}, {UUID: "GPU-b", MiB: 1024}},
				PodUID: "0b5c1f0e-8d1e-4f57-9a0c-6c1e2a3b4c5d", PodLimits: []limithook.Limit{{UUID: "GPU-a", MiB: 5120}, {UUID: "GPU-b", MiB: 1024}, {UUID: "GPU-c", MiB: 3072}}}
			if d := cmp.Diff(want, a); d != "" {
				t.Errorf("args (-want +got):\n%s", d)
			}
		})
	}
}

// A container's memory limit above its grant, and its pod's, make <soft>:<hard> arguments on
// the cards where they are larger; the other cards keep the grant as both.
func TestLimitHookSoftAndHard(t *testing.T) {
	cards := []gpushare.Device{{UUID: "GPU-a"}, {UUID: "GPU-b"}}
	pod := PodGrant{UID: "0b5c1f0e-8d1e-4f57-9a0c-6c1e2a3b4c5d", Cards: cards, Units: []int64{5, 1}, Limits: []int64{9, 1}}
	h := LimitHook(LimitHookConfig{Path: "/h"}, gpushare.GiB, cards, []int64{2, 1}, []int64{6, 1}, pod)
	tail := h.Args[len(h.Args)-4:]
	if d := cmp.Diff([]string{"--pod-limit=GPU-a=5120:9216", "--pod-limit=GPU-b=1024", "GPU-a=2048:6144", "GPU-b=1024"}, tail); d != "" {
		t.Errorf("arguments (-want +got):\n%s", d)
	}
	if _, err := limithook.ParseArgs(h.Args[1:]); err != nil {
		t.Errorf("the hook refuses its arguments: %v", err)
	}
}
