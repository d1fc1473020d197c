package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

func TestApplyEnv(t *testing.T) {
	t.Setenv("NODE_NAME", "from-env")
	t.Setenv("MEMORY_UNIT", "MiB")
	t.Setenv("HEALTH_RECOVERY", "30s")
	t.Setenv("V", "9") // klog's flag: not ours, must be ignored
	var o options
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	o.addFlags(fs)
	ours := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { ours[f.Name] = true })
	var v string
	fs.StringVar(&v, "v", "0", "")
	if err := fs.Parse([]string{"--memory-unit=256MiB"}); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(fs, ours); err != nil {
		t.Fatal(err)
	}
	got := []string{o.nodeName, o.memoryUnit, o.healthRecovery.String(), v}
	// The command line wins over the environment.
	want := []string{"from-env", "256MiB", (30 * time.Second).String(), "0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("flags (-want,+got):\n%s", diff)
	}

	t.Setenv("HEALTH_RECOVERY", "soon")
	fs2 := pflag.NewFlagSet("t", pflag.ContinueOnError)
	var o2 options
	o2.addFlags(fs2)
	if err := applyEnv(fs2, ours); err == nil {
		t.Error("HEALTH_RECOVERY=soon: want an error")
	}
}
