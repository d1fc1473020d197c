package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"github.com/gpushare/gpushare/internal/flagenv"
	"github.com/gpushare/gpushare/pkg/leader"
	"github.com/gpushare/gpushare/pkg/routes"
)

// tlsArgs name a complete TLS file set (validate does not read the files).
func tlsArgs() []string {
	return []string{"--tls-cert-file=/c.crt", "--tls-private-key-file=/c.key", "--client-ca-file=/ca.crt"}
}

func TestFlagsAndEnv(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    func(o *options)
		wantErr string
	}{
		// The defaults alone name no transport: the extender must not end up on plain HTTP
		// by omission.
		{name: "defaults", wantErr: "no transport: give --tls-cert-file, --tls-private-key-file and --client-ca-file"},
		{name: "insecure", args: []string{"--insecure-serve-http"}, want: func(o *options) { o.insecureHTTP = true }},
		{
			name: "tls", args: tlsArgs(),
			want: func(o *options) { o.tlsCertFile, o.tlsKeyFile, o.clientCAFile = "/c.crt", "/c.key", "/ca.crt" },
		},
		{name: "tls without client CA", args: tlsArgs()[:2], wantErr: "TLS needs all of"},
		{
			name: "client names", args: append(tlsArgs(), "--client-allowed-names=kube-scheduler,spiffe://c/sa/s"),
			want: func(o *options) {
				o.tlsCertFile, o.tlsKeyFile, o.clientCAFile = "/c.crt", "/c.key", "/ca.crt"
				o.clientNames = []string{"kube-scheduler", "spiffe://c/sa/s"}
			},
		},
		{
			name: "client names variable", args: tlsArgs(), env: map[string]string{"GPUSHARE_CLIENT_ALLOWED_NAMES": "a,b"},
			want: func(o *options) {
				o.tlsCertFile, o.tlsKeyFile, o.clientCAFile = "/c.crt", "/c.key", "/ca.crt"
				o.clientNames = []string{"a", "b"}
			},
		},
		{name: "no client name", args: append(tlsArgs(), "--client-allowed-names="), wantErr: `--client-allowed-names "": name at least one client certificate`},
		{name: "an empty client name", args: append(tlsArgs(), "--client-allowed-names=a,"), wantErr: `--client-allowed-names "a,": name at least one client certificate`},
		{name: "tls and insecure", args: append([]string{"--insecure-serve-http"}, tlsArgs()...), wantErr: "--insecure-serve-http serves plain HTTP"},
		{name: "same ports", args: []string{"--insecure-serve-http", "--diagnostics-port=12345"}, wantErr: "--diagnostics-port 12345 must differ from --port"},
		{name: "diagnostics port out of range", args: []string{"--insecure-serve-http", "--diagnostics-port=0"}, wantErr: "--diagnostics-port 0 out of range"},
		{name: "bind address not an IP", args: []string{"--insecure-serve-http", "--bind-address=example.com"}, wantErr: "not an IP"},
		{
			name: "env fills what flags leave", args: []string{"--port=8080", "--insecure-serve-http"},
			env: map[string]string{"GPUSHARE_PORT": "9090", "GPUSHARE_RESERVATION_TTL": "30s", "GPUSHARE_POLICY": "spread"},
			want: func(o *options) {
				o.port, o.reservationTTL, o.policy, o.insecureHTTP = 8080, 30*time.Second, "spread", true
			},
		},
		{name: "unknown policy", args: []string{"--insecure-serve-http", "--policy=random"}, wantErr: `unknown placement policy "random"`},
		{name: "bad selector", args: []string{"--node-selector=a b c"}, wantErr: "--node-selector"},
		{name: "same resources", args: []string{"--count-resource=aliyun.com/gpu-mem"}, wantErr: "both"},
		{name: "bad env", env: map[string]string{"GPUSHARE_PORT": "many"}, wantErr: `GPUSHARE_PORT: invalid argument "many" for "--port"`},
		{
			name: "every flag of ours has its variable", args: []string{"--kubeconfig=/k"},
			env: map[string]string{
				"GPUSHARE_KUBECONFIG": "/env", "GPUSHARE_BIND_ADDRESS": "127.0.0.1", "GPUSHARE_NODE_SELECTOR": "gpu=yes",
				"GPUSHARE_MEM_RESOURCE": "x.io/mem", "GPUSHARE_COUNT_RESOURCE": "x.io/count", "GPUSHARE_MAX_REQUEST_BYTES": "1024",
				"GPUSHARE_KUBE_API_QPS": "5", "GPUSHARE_KUBE_API_BURST": "10", "GPUSHARE_SHUTDOWN_TIMEOUT": "1s", "GPUSHARE_PROFILING": "true",
				"GPUSHARE_DIAGNOSTICS_PORT": "9000", "GPUSHARE_TLS_CERT_FILE": "/e.crt", "GPUSHARE_TLS_PRIVATE_KEY_FILE": "/e.key",
				"GPUSHARE_CLIENT_CA_FILE": "/eca.crt",
			},
			want: func(o *options) {
				o.kubeconfig, o.bindAddress, o.nodeSelector, o.memResource, o.countResource = "/k", "127.0.0.1", "gpu=yes", "x.io/mem", "x.io/count"
				o.maxRequestBytes, o.qps, o.burst, o.shutdownTimeout, o.profiling = 1024, 5, 10, time.Second, true
				o.diagnosticsPort, o.tlsCertFile, o.tlsKeyFile, o.clientCAFile = 9000, "/e.crt", "/e.key", "/eca.crt"
			},
		},
		// klog's flags read no environment variable: a value -v would reject is not read.
		{
			name: "klog flags unbound", args: []string{"--insecure-serve-http"},
			env:  map[string]string{"GPUSHARE_V": "loud", "GPUSHARE_VMODULE": "=", "V": "x"},
			want: func(o *options) { o.insecureHTTP = true },
		},
		{name: "zero ttl", args: []string{"--insecure-serve-http", "--reservation-ttl=0s"}, wantErr: "--reservation-ttl"},
		{name: "zero grace", args: []string{"--insecure-serve-http", "--unrecorded-grace=0s"}, wantErr: "--unrecorded-grace 0s must be positive"},
		{
			name: "grace from the environment", args: []string{"--insecure-serve-http"}, env: map[string]string{"GPUSHARE_UNRECORDED_GRACE": "10m"},
			want: func(o *options) { o.insecureHTTP, o.unrecordedGrace = true, 10*time.Minute },
		},
		{
			name: "bind and input limits",
			args: []string{"--insecure-serve-http", "--scheduler-name=a,b", "--scheduler-name=c", "--bind-non-gpu-pods", "--max-nodes-per-request=5",
				"--max-inflight=7", "--pod-get-qps=0.5", "--pod-get-burst=3", "--read-header-timeout=1s", "--read-timeout=2s",
				"--write-timeout=61s", "--idle-timeout=4s"},
			want: func(o *options) {
				o.insecureHTTP = true
				o.schedulerNames, o.bindNonGPUPods, o.maxNodesPerRequest, o.maxInflight = []string{"a", "b", "c"}, true, 5, 7
				o.podGetQPS, o.podGetBurst = 0.5, 3
				o.timeouts = routes.Timeouts{ReadHeader: time.Second, Read: 2 * time.Second, Write: 61 * time.Second, Idle: 4 * time.Second}
			},
		},
		{
			name: "their variables", args: []string{"--insecure-serve-http"},
			env: map[string]string{"GPUSHARE_SCHEDULER_NAME": "x,y", "GPUSHARE_BIND_NON_GPU_PODS": "true",
				"GPUSHARE_MAX_NODES_PER_REQUEST": "9", "GPUSHARE_MAX_INFLIGHT": "8", "GPUSHARE_POD_GET_QPS": "2",
				"GPUSHARE_POD_GET_BURST": "4", "GPUSHARE_WRITE_TIMEOUT": "2m"},
			want: func(o *options) {
				o.insecureHTTP = true
				o.schedulerNames, o.bindNonGPUPods, o.maxNodesPerRequest, o.maxInflight = []string{"x", "y"}, true, 9, 8
				o.podGetQPS, o.podGetBurst, o.timeouts.Write = 2, 4, 2*time.Minute
			},
		},
		{name: "default limits", args: []string{"--insecure-serve-http"}, want: func(o *options) {
			o.insecureHTTP = true
			o.clientNames = []string{"gpushare-kube-scheduler"}
			o.schedulerNames, o.maxRequestBytes, o.maxNodesPerRequest, o.maxInflight = []string{"default-scheduler"}, 4<<20, 20000, 256
			o.timeouts = routes.Timeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: 90 * time.Second, Idle: 2 * time.Minute}
		}},
		{name: "write timeout within bind's", args: []string{"--insecure-serve-http", "--write-timeout=30s"}, wantErr: "write timeout 30s must exceed 1m0s"},
		{name: "empty scheduler name", args: []string{"--insecure-serve-http", "--scheduler-name=a,"}, wantErr: `--scheduler-name "a,": names must not be empty`},
		{name: "no in-flight cap", args: []string{"--insecure-serve-http", "--max-inflight=0"}, wantErr: "--max-inflight 0"},
		{name: "leader election off by default", args: []string{"--insecure-serve-http"}, want: func(o *options) {
			o.insecureHTTP = true
			o.leaderElection = leader.Config{Namespace: "kube-system", Name: "gpushare-extender",
				LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
		}},
		{
			name: "leader election",
			args: []string{"--insecure-serve-http", "--leader-elect", "--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s",
				"--leader-elect-retry-period=4s", "--leader-elect-resource-namespace=gpushare", "--leader-elect-resource-name=ext"},
			want: func(o *options) {
				o.insecureHTTP, o.leaderElect = true, true
				o.leaderElection = leader.Config{Namespace: "gpushare", Name: "ext",
					LeaseDuration: 30 * time.Second, RenewDeadline: 20 * time.Second, RetryPeriod: 4 * time.Second}
			},
		},
		{
			name: "leader election variables", args: []string{"--insecure-serve-http"},
			env: map[string]string{"GPUSHARE_LEADER_ELECT": "true", "GPUSHARE_LEADER_ELECT_LEASE_DURATION": "20s",
				"GPUSHARE_LEADER_ELECT_RESOURCE_NAME": "ext2"},
			want: func(o *options) {
				o.insecureHTTP, o.leaderElect = true, true
				o.leaderElection.LeaseDuration, o.leaderElection.Name = 20*time.Second, "ext2"
			},
		},
		// Followers would take the lease while the leader still renews it.
		{name: "lease within renew deadline", args: []string{"--insecure-serve-http", "--leader-elect", "--leader-elect-lease-duration=10s"},
			wantErr: "--leader-elect-lease-duration 10s must exceed --leader-elect-renew-deadline 10s"},
		// 1.2 * 2s = 2.4s: no room for one retry before the leader gives up.
		{name: "renew deadline within retry", args: []string{"--insecure-serve-http", "--leader-elect", "--leader-elect-renew-deadline=2s"},
			wantErr: "--leader-elect-renew-deadline 2s must exceed 1.2 times --leader-elect-retry-period 2s"},
		{name: "zero retry period", args: []string{"--insecure-serve-http", "--leader-elect", "--leader-elect-retry-period=0s"},
			wantErr: "--leader-elect-retry-period 0s must be positive"},
		{name: "empty lease name", args: []string{"--insecure-serve-http", "--leader-elect", "--leader-elect-resource-name="},
			wantErr: "--leader-elect-resource-name"},
		// Without --leader-elect its timing is not used, so not checked.
		{name: "timing unchecked without leader election", args: []string{"--insecure-serve-http", "--leader-elect-lease-duration=1s"},
			want: func(o *options) { o.insecureHTTP, o.leaderElection.LeaseDuration = true, time.Second }},
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
		"port":             "(env GPUSHARE_PORT)",
		"reservation-ttl":  "(env GPUSHARE_RESERVATION_TTL)",
		"unrecorded-grace": "(env GPUSHARE_UNRECORDED_GRACE)",
		"kube-api-qps":     "(env GPUSHARE_KUBE_API_QPS)",
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
