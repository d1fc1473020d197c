package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"github.com/gpushare/gpushare/internal/flagenv"
	"github.com/gpushare/gpushare/pkg/routes"
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
		{
			name: "bind and input limits",
			args: []string{"--scheduler-name=a,b", "--scheduler-name=c", "--bind-non-gpu-pods", "--max-nodes-per-request=5",
				"--max-inflight=7", "--pod-get-qps=0.5", "--pod-get-burst=3", "--read-header-timeout=1s", "--read-timeout=2s",
				"--write-timeout=61s", "--idle-timeout=4s"},
			want: func(o *options) {
				o.schedulerNames, o.bindNonGPUPods, o.maxNodesPerRequest, o.maxInflight = []string{"a", "b", "c"}, true, 5, 7
				o.podGetQPS, o.podGetBurst = 0.5, 3
				o.timeouts = routes.Timeouts{ReadHeader: time.Second, Read: 2 * time.Second, Write: 61 * time.Second, Idle: 4 * time.Second}
			},
		},
		{
			name: "their variables",
			env: map[string]string{"GPUSHARE_SCHEDULER_NAME": "x,y", "GPUSHARE_BIND_NON_GPU_PODS": "true",
				"GPUSHARE_MAX_NODES_PER_REQUEST": "9", "GPUSHARE_MAX_INFLIGHT": "8", "GPUSHARE_POD_GET_QPS": "2",
				"GPUSHARE_POD_GET_BURST": "4", "GPUSHARE_WRITE_TIMEOUT": "2m"},
			want: func(o *options) {
				o.schedulerNames, o.bindNonGPUPods, o.maxNodesPerRequest, o.maxInflight = []string{"x", "y"}, true, 9, 8
				o.podGetQPS, o.podGetBurst, o.timeouts.Write = 2, 4, 2*time.Minute
			},
		},
		{name: "default limits", want: func(o *options) {
			o.schedulerNames, o.maxRequestBytes, o.maxNodesPerRequest, o.maxInflight = []string{"default-scheduler"}, 4<<20, 20000, 256
			o.timeouts = routes.Timeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 90 * time.Second, Idle: 2 * time.Minute}
		}},
		{name: "write timeout within bind's", args: []string{"--write-timeout=30s"}, wantErr: "write timeout 30s must exceed 1m0s"},
		{name: "empty scheduler name", args: []string{"--scheduler-name=a,"}, wantErr: `--scheduler-name "a,": names must not be empty`},
		{name: "no in-flight cap", args: []string{"--max-inflight=0"}, wantErr: "--max-inflight 0"},
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
