package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"github.com/gpushare/gpushare/internal/flagenv"
)

func TestFlagsAndEnv(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    func(o *options)
		wantErr string
	}{
		{name: "defaults"},
		{
			name: "GPUSHARE_<FLAG>, command line first", args: []string{"--memory-unit=256MiB"},
			env: map[string]string{"GPUSHARE_NODE_NAME": "n1", "GPUSHARE_MEMORY_UNIT": "MiB", "GPUSHARE_HEALTH_RECOVERY": "30s", "GPUSHARE_SIMULATE": "t4"},
			want: func(o *options) {
				o.nodeName, o.memoryUnit, o.healthRecovery, o.simulate = "n1", "256MiB", 30*time.Second, "t4"
			},
		},
		{
			// The names of earlier releases, as older DaemonSets set NODE_NAME.
			name: "bare names still work",
			env:  map[string]string{"NODE_NAME": "from-env", "MEMORY_UNIT": "MiB", "HEALTH_RECOVERY": "30s", "KUBECONFIG": "/k"},
			want: func(o *options) {
				o.nodeName, o.memoryUnit, o.healthRecovery, o.kubeconfig = "from-env", "MiB", 30*time.Second, "/k"
			},
		},
		{
			name: "GPUSHARE_<FLAG> over the bare name",
			env:  map[string]string{"NODE_NAME": "old", "GPUSHARE_NODE_NAME": "new"},
			want: func(o *options) { o.nodeName = "new" },
		},
		{
			name: "usage watchdog flags",
			env: map[string]string{"GPUSHARE_USAGE_INTERVAL": "0s", "GPUSHARE_OVER_GRANT_THRESHOLD": "0.2", "GPUSHARE_OVER_GRANT_GRACE": "5m",
				"GPUSHARE_OVER_GRANT_ACTION": "evict", "GPUSHARE_PROC_ROOT": "/host/proc", "GPUSHARE_SIMULATE_PROCESSES_FILE": "/p.yaml"},
			want: func(o *options) {
				o.usageInterval, o.overGrantThreshold, o.overGrantGrace, o.overGrantAction, o.procRoot, o.simulateProcesses = 0, 0.2, 5*time.Minute, "evict", "/host/proc", "/p.yaml"
			},
		},
		{
			name: "per-allocation CDI specs",
			env:  map[string]string{"GPUSHARE_DEVICE_LIST_STRATEGY": "cdi-allocation", "GPUSHARE_CDI_SPEC_DIR": "/etc/cdi"},
			want: func(o *options) { o.deviceList, o.cdiSpecDir = "cdi-allocation", "/etc/cdi" },
		},
		{
			name: "DRA back end",
			env:  map[string]string{"GPUSHARE_BACKEND": "dra", "GPUSHARE_DRA_PLUGIN_DIR": "/p", "GPUSHARE_DRA_REGISTRAR_DIR": "/r"},
			want: func(o *options) { o.backend, o.draPluginDir, o.draRegistrarDir = "dra", "/p", "/r" },
		},
		{
			name: "empty metrics address disables",
			env:  map[string]string{"GPUSHARE_METRICS_ADDRESS": ""},
			want: func(o *options) { o.metricsAddress = "" },
		},
		{name: "bad value", env: map[string]string{"HEALTH_RECOVERY": "soon"}, wantErr: `HEALTH_RECOVERY: invalid argument "soon" for "--health-recovery"`},
		// Neither klog's flags nor --version read the environment (values they would reject).
		{name: "unbound", env: map[string]string{"V": "loud", "GPUSHARE_V": "loud", "VERSION": "v1.2.3", "GPUSHARE_VERSION": "v1.2.3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			for _, k := range []string{"NODE_NAME", "KUBECONFIG"} { // may be set where the tests run
				if _, ok := tc.env[k]; !ok {
					t.Setenv(k, "")
					unsetenv(t, k)
				}
			}
			var o options
			fs := flagSet(&o, pflag.ContinueOnError)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := flagenv.Apply(fs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want options
			want.addFlags(pflag.NewFlagSet("want", pflag.ContinueOnError))
			if tc.want != nil {
				tc.want(&want)
			}
			if d := cmp.Diff(want, o, cmp.AllowUnexported(options{})); d != "" {
				t.Errorf("options (-want,+got):\n%s", d)
			}
		})
	}
}

// TestHelp: --help names each of our flags' variables, and none for klog's or --version.
func TestHelp(t *testing.T) {
	var o options
	fs := flagSet(&o, pflag.ContinueOnError)
	for flag, want := range map[string]string{
		"node-name":   "(env GPUSHARE_NODE_NAME; also NODE_NAME)",
		"memory-unit": "(env GPUSHARE_MEMORY_UNIT; also MEMORY_UNIT)",
		"simulate":    "(env GPUSHARE_SIMULATE; also SIMULATE)",
	} {
		if u := fs.Lookup(flag).Usage; !strings.HasSuffix(u, want) {
			t.Errorf("--%s usage %q, want it to end with %q", flag, u, want)
		}
	}
	for _, flag := range []string{"version", "v", "vmodule"} {
		if u := fs.Lookup(flag).Usage; strings.Contains(u, "(env ") {
			t.Errorf("--%s usage %q names a variable", flag, u)
		}
	}
}

// unsetenv removes k for the test; t.Setenv before it restores the old value afterwards.
func unsetenv(t *testing.T, k string) {
	t.Helper()
	if err := os.Unsetenv(k); err != nil {
		t.Fatal(err)
	}
}

// TestToolkitHookFlags: NVIDIA's toolkit hook serves the device plugin back end only; with
// --backend=dra its flags are refused at start.
func TestToolkitHookFlags(t *testing.T) {
	for _, tc := range []struct {
		name, backend, hook, root, wantErr string
	}{
		{name: "device plugin", backend: "device-plugin", hook: "/usr/bin/nvidia-cdi-hook", root: "/run/nvidia/driver"},
		{name: "dra with the hook", backend: "dra", hook: "/usr/bin/nvidia-cdi-hook", wantErr: "for the device plugin back end"},
		{name: "dra with a driver root", backend: "dra", root: "/", wantErr: "for the device plugin back end"},
		{name: "dra without", backend: "dra"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o options
			fs := flagSet(&o, pflag.ContinueOnError)
			if err := fs.Parse(nil); err != nil {
				t.Fatal(err)
			}
			o.nodeName, o.backend, o.nvidiaCDIHook, o.nvidiaDriverRoot = "n1", tc.backend, tc.hook, tc.root
			_, err := parseOptions(o)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("parseOptions = %v, want an error saying %q", err, tc.wantErr)
			}
		})
	}
}
