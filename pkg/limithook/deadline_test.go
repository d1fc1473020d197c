package limithook

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// hangingSetter is a driver whose limit call never returns.
type hangingSetter struct{ block chan struct{} }

func (s hangingSetter) SetLimit(context.Context, string, Cgroup, Limit) error {
	<-s.block // never closed: the call hangs
	return nil
}
func (hangingSetter) AcceptsV1() bool            { return false }
func (hangingSetter) Callee() (who, call string) { return "NVML", "nvmlDeviceSetMemoryLimits_v1" }

const testDeadline = 100 * time.Millisecond

// returnsWithin fails t when f takes more than 5 × testDeadline: a generous bound that tells
// an abandoned call from a hung one, not a timing benchmark.
func returnsWithin(t *testing.T, f func() error) error {
	t.Helper()
	start := time.Now()
	err := f()
	if took := time.Since(start); took > 5*testDeadline {
		t.Errorf("returned after %s, want within %s", took, 5*testDeadline)
	}
	return err
}

func TestRunAbandonsAHangingLimitCallAtTheDeadline(t *testing.T) {
	a := withPod(Args{Mode: ModeNVML, ProcRoot: fakeProc(t, 7, cgroupV2), Deadline: testDeadline, Limits: []Limit{{UUID: "GPU-hang", MiB: 1024}}})
	err := returnsWithin(t, func() error {
		return Run(context.Background(), a, stateJSON(containerID, 7), hangingSetter{block: make(chan struct{})})
	})
	var d *DeadlineError
	if !errors.As(err, &d) {
		t.Fatalf("Run = %v, want a *DeadlineError", err)
	}
	for _, w := range []string{"card GPU-hang", "NVML did not answer within 100ms", "nvmlDeviceSetMemoryLimits_v1 abandoned", containerID} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Run error %q does not say %q", err, w)
		}
	}
	if r, card := ReasonOf(err); r != ReasonDeadline || card != "GPU-hang" {
		t.Errorf("ReasonOf = %s, %s; want %s, GPU-hang", r, card, ReasonDeadline)
	}
}

// An NVML that never finishes loading: the hook gives up at its deadline and records why.
func TestExecAbandonsAHangingLibraryOpenAtTheDeadline(t *testing.T) {
	failures := t.TempDir()
	block := make(chan struct{}) // never closed
	h := Hook{Open: func(string) (Setter, func(), error) { <-block; return nil, nil, nil }}
	args := FormatArgs("hook", withPod(Args{Mode: ModeNVML, ProcRoot: fakeProc(t, 7, cgroupV2), Deadline: testDeadline, FailureDir: failures, Limits: []Limit{{UUID: "GPU-a", MiB: 1}}}))
	err := returnsWithin(t, func() error { return h.Exec(context.Background(), args[1:], stateJSON(containerID, 7)) })
	if err == nil || !strings.Contains(err.Error(), "NVML did not answer within 100ms (loading and initialising the library abandoned)") {
		t.Fatalf("Exec = %v, want the library's deadline error", err)
	}
	recs := readFailures(t, failures)
	if len(recs) != 1 || recs[0].Reason != ReasonDeadline || recs[0].ContainerID != containerID || recs[0].Card != "" {
		t.Errorf("failure records = %+v, want one of reason %s for container %s, no card", recs, ReasonDeadline, containerID)
	}
}

func TestWithinReturnsTheCallsAnswerAndStartsNothingPastTheDeadline(t *testing.T) {
	want := errors.New("not found")
	if err := within(context.Background(), time.Second, "GPU-a", "NVML", "x", func() error { return want }); err != want {
		t.Errorf("within = %v, want %v", err, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ctx.Done()
	called := false
	err := within(ctx, time.Second, "GPU-a", "NVML", "x", func() error { called = true; return nil })
	if called || !strings.Contains(err.Error(), "card GPU-a: NVML did not answer within 1s (x abandoned)") {
		t.Errorf("within past the deadline = %v, called %v", err, called)
	}
}

func TestRuntimeTimeoutSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int{DefaultDeadline: 30, 100 * time.Millisecond: 11, MaxDeadline: 130} {
		if got := RuntimeTimeoutSeconds(d); got != want {
			t.Errorf("RuntimeTimeoutSeconds(%s) = %d, want %d", d, got, want)
		}
	}
}
