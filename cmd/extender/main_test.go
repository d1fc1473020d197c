package main

import (
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
			name: "env fills what flags leave", args: []string{"--port=8080"},
			env:  map[string]string{"GPUSHARE_PORT": "9090", "GPUSHARE_RESERVATION_TTL": "30s", "GPUSHARE_POLICY": "spread"},
			want: func(o *options) { o.port, o.reservationTTL, o.policy = 8080, 30*time.Second, "spread" },
		},
		{name: "unknown policy", args: []string{"--policy=random"}, wantErr: `unknown placement policy "random"`},
		{name: "bad selector", args: []string{"--node-selector=a b c"}, wantErr: "--node-selector"},
		{name: "same resources", args: []string{"--count-resource=aliyun.com/gpu-mem"}, wantErr: "both"},
		{name: "bad env", env: map[string]string{"GPUSHARE_PORT": "many"}, wantErr: `GPUSHARE_PORT: invalid argument "many" for "--port"`},
		{
			name: "every flag of ours has its variable", args: []string{"--kubeconfig=/k"},
			env: map[string]string{
				"GPUSHARE_KUBECONFIG": "/env", "GPUSHARE_BIND_ADDRESS": "127.0.0.1", "GPUSHARE_NODE_SELECTOR": "gpu=yes",
				"GPUSHARE_MEM_RESOURCE": "x.io/mem", "GPUSHARE_COUNT_RESOURCE": "x.io/count", "GPUSHARE_MAX_REQUEST_BYTES": "1024",
				"GPUSHARE_KUBE_API_QPS": "5", "GPUSHARE_KUBE_API_BURST": "10", "GPUSHARE_SHUTDOWN_TIMEOUT": "1s", "GPUSHARE_PROFILING": "true",
			},
			want: func(o *options) {
				o.kubeconfig, o.bindAddress, o.nodeSelector, o.memResource, o.countResource = "/k", "127.0.0.1", "gpu=yes", "x.io/mem", "x.io/count"
				o.maxRequestBytes, o.qps, o.burst, o.shutdownTimeout, o.profiling = 1024, 5, 10, time.Second, true
			},
		},
		// klog's flags read no environment variable: a value -v would reject is not read.
		{name: "klog flags unbound", env: map[string]string{"GPUSHARE_V": "loud", "GPUSHARE_VMODULE": "=", "V": "x"}},
		{name: "zero ttl", args: []string{"--reservation-ttl=0s"}, wantErr: "--reservation-ttl"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var o options
			fs := flagSet(&o, pflag.ContinueOnError)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := flagenv.Apply(fs)
			if err == nil {
				_, _, _, err = o.validate()
			}
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
			wfs := pflag.NewFlagSet("want", pflag.ContinueOnError)
			want.addFlags(wfs)
			if tc.want != nil {
				tc.want(&want)
			}
			if d := cmp.Diff(want, o, cmp.AllowUnexported(options{})); d != "" {
				t.Errorf("options (-want,+got):\n%s", d)
			}
		})
	}
}

// TestHelp: --help names each of our flags' variable, and none for klog's.
func TestHelp(t *testing.T) {
	var o options
	fs := flagSet(&o, pflag.ContinueOnError)
	for flag, want := range map[string]string{
		"port":            "(env GPUSHARE_PORT)",
		"reservation-ttl": "(env GPUSHARE_RESERVATION_TTL)",
		"kube-api-qps":    "(env GPUSHARE_KUBE_API_QPS)",
	} {
		if u := fs.Lookup(flag).Usage; !strings.HasSuffix(u, want) {
			t.Errorf("--%s usage %q, want it to end with %q", flag, u, want)
		}
	}
	for _, flag := range []string{"v", "vmodule", "logtostderr"} {
		if u := fs.Lookup(flag).Usage; strings.Contains(u, "(env ") {
			t.Errorf("klog's --%s usage %q names a variable", flag, u)
		}
	}
}
