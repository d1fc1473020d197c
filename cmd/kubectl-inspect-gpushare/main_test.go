package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gpushare/gpushare/internal/flagenv"
	"github.com/gpushare/gpushare/pkg/inspect"
)

// TestFlagsAndEnv runs the command without a cluster: a bad --output stops it before it
// connects, which tells whether GPUSHARE_OUTPUT was read.
func TestFlagsAndEnv(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{name: "environment read", env: map[string]string{"GPUSHARE_OUTPUT": "xml"}, wantErr: `--output "xml"`},
		{name: "command line first", args: []string{"-o", "xml"}, env: map[string]string{"GPUSHARE_OUTPUT": "json"}, wantErr: `--output "xml"`},
		{name: "resources", env: map[string]string{"GPUSHARE_MEM_RESOURCE": "x.io/a", "GPUSHARE_COUNT_RESOURCE": "x.io/a"}, wantErr: "both"},
		{name: "bad value", env: map[string]string{"GPUSHARE_PENDING": "maybe"}, wantErr: `environment variable GPUSHARE_PENDING: invalid argument "maybe" for "--pending"`},
		{
			// kubectl's connection flags and klog's -v read no GPUSHARE_ variable: these
			// values would be rejected, or change the error below.
			name: "kubectl's flags unbound", args: []string{"-o", "xml"},
			env:     map[string]string{"GPUSHARE_V": "loud", "GPUSHARE_REQUEST_TIMEOUT": "soon", "GPUSHARE_KUBECONFIG": "/nonexistent"},
			wantErr: `--output "xml"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var out bytes.Buffer
			cmd := newCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &out})
			cmd.SetArgs(tc.args)
			err := cmd.ExecuteContext(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want it to mention %q", err, tc.wantErr)
			}
		})
	}
}

// TestHelp: -h names the variable of each of the plugin's own flags, none for kubectl's or
// klog's.
func TestHelp(t *testing.T) {
	var out bytes.Buffer
	cmd := newCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &out})
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	help := out.String()
	want := []string{"(env GPUSHARE_DETAILS)", "(env GPUSHARE_OUTPUT)", "(env GPUSHARE_PENDING)", "(env GPUSHARE_MEM_RESOURCE)", "(env GPUSHARE_COUNT_RESOURCE)",
		"(env GPUSHARE_CHECK)", "(env GPUSHARE_EXTENDER_URL)", "(env GPUSHARE_EXTENDER_NAMESPACE)", "(env GPUSHARE_EXTENDER_SERVICE)", "(env GPUSHARE_SHARE_PLUGIN_URLS)",
		"(env GPUSHARE_EXTENDER_CLIENT_CERT)", "(env GPUSHARE_EXTENDER_CLIENT_KEY)", "(env GPUSHARE_EXTENDER_CA)",
		"(env GPUSHARE_VERIFY)", "(env GPUSHARE_PROBE_IMAGE)", "(env GPUSHARE_VERIFY_TIMEOUT)"}
	for _, want := range want {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
	for _, line := range strings.Split(help, "\n") {
		for _, flag := range []string{"--kubeconfig", "--context", "--namespace", "--server", "--v "} {
			if strings.Contains(line, flag) && strings.Contains(line, "(env ") {
				t.Errorf("help names a variable for %s: %q", flag, line)
			}
		}
	}
	if n := strings.Count(help, "(env "); n != len(want) {
		t.Errorf("help names %d variables, want %d:\n%s", n, len(want), help)
	}
	cmd.PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if v := flagenv.Vars(f); v != nil {
			t.Errorf("kubectl's --%s reads %v", f.Name, v)
		}
	})
}

// TestExitCode: main exits with inspect.ExitCode; a misused --check is 2, other failures 1.
func TestExitCode(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want int
	}{
		{name: "bad output", args: []string{"-o", "xml"}, want: 1},
		{name: "bad output with --check", args: []string{"--check", "-o", "xml"}, want: 2},
		{name: "--check from the environment", args: []string{"-o", "xml"}, env: map[string]string{"GPUSHARE_CHECK": "true"}, want: 2},
		{name: "bad output with --verify", args: []string{"--verify", "-o", "xml"}, want: 2},
		{name: "--verify with --check", args: []string{"--verify", "--check"}, want: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var out bytes.Buffer
			cmd := newCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &out})
			cmd.SetArgs(tc.args)
			err := cmd.ExecuteContext(context.Background())
			if got := inspect.ExitCode(err); got != tc.want {
				t.Errorf("ExitCode(%v) = %d, want %d", err, got, tc.want)
			}
		})
	}
}
