package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
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
		{name: "bad env", env: map[string]string{"GPUSHARE_PORT": "many"}, wantErr: "GPUSHARE_PORT"},
		{name: "zero ttl", args: []string{"--reservation-ttl=0s"}, wantErr: "--reservation-ttl"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var o options
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.addFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := applyEnv(fs)
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
