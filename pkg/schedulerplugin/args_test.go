package schedulerplugin

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
)

func TestDecodeArgs(t *testing.T) {
	tests := []struct {
		name    string
		obj     runtime.Object
		wantErr string // substring; "" means valid
		check   func(*GPUShareArgs) bool
	}{
		{name: "none: defaults", obj: nil, check: func(a *GPUShareArgs) bool {
			return a.Policy == "fgd" && a.NodeSelector == "cgpu=true" && a.MemResource == "aliyun.com/gpu-mem" &&
				a.CountResource == "aliyun.com/gpu-count" && a.ReservationTTL.Duration == 2*time.Minute && a.BindTimeout.Duration == 30*time.Second &&
				a.UnrecordedGrace.Duration == 2*time.Minute && *a.ClaimNarrowing && *a.ClaimNodesToRate == 500
		}},
		{name: "claim narrowing", obj: &runtime.Unknown{Raw: []byte(`{"claimNarrowing":false,"claimNodesToRate":0}`)},
			check: func(a *GPUShareArgs) bool { return !*a.ClaimNarrowing && *a.ClaimNodesToRate == 0 }},
		{name: "negative claimNodesToRate", obj: &runtime.Unknown{Raw: []byte(`{"claimNodesToRate":-1}`)}, wantErr: "args.claimNodesToRate: Invalid value"},
		{name: "raw, typed", obj: &runtime.Unknown{Raw: []byte(`{"apiVersion":"kubescheduler.config.k8s.io/v1","kind":"GPUShareArgs","policy":"binpack","reservationTTL":"90s"}`)},
			check: func(a *GPUShareArgs) bool {
				return a.Policy == "binpack" && a.ReservationTTL.Duration == 90*time.Second
			}},
		{name: "raw, untyped", obj: &runtime.Unknown{Raw: []byte(`{"nodeSelector":"gpu in (a,b)"}`)},
			check: func(a *GPUShareArgs) bool { return a.NodeSelector == "gpu in (a,b)" && a.Policy == "fgd" }},
		{name: "built", obj: &GPUShareArgs{Policy: "spread"}, check: func(a *GPUShareArgs) bool { return a.Policy == "spread" }},
		{name: "unknown field", obj: &runtime.Unknown{Raw: []byte(`{"polcy":"fgd"}`)}, wantErr: `unknown field "polcy"`},
		{name: "unknown policy", obj: &GPUShareArgs{Policy: "tetris"}, wantErr: `pluginConfig[GPUShare].args.policy: Unsupported value: "tetris"`},
		{name: "bad selector", obj: &GPUShareArgs{NodeSelector: "a=("}, wantErr: "pluginConfig[GPUShare].args.nodeSelector: Invalid value"},
		{name: "bad resource", obj: &GPUShareArgs{MemResource: "gpu mem!"}, wantErr: "pluginConfig[GPUShare].args.memResource: Invalid value"},
		{name: "same resources", obj: &GPUShareArgs{MemResource: "a/b", CountResource: "a/b"}, wantErr: "args.countResource: Invalid value"},
		{name: "grace", obj: &runtime.Unknown{Raw: []byte(`{"unrecordedGrace":"10m"}`)},
			check: func(a *GPUShareArgs) bool { return a.UnrecordedGrace.Duration == 10*time.Minute }},
		{name: "zero grace", obj: &runtime.Unknown{Raw: []byte(`{"unrecordedGrace":"0s"}`)}, wantErr: "args.unrecordedGrace: Invalid value"},
		{name: "negative ttl", obj: &runtime.Unknown{Raw: []byte(`{"reservationTTL":"-1s"}`)}, wantErr: "args.reservationTTL: Invalid value"},
		{name: "wrong kind", obj: &runtime.Unknown{Raw: []byte(`{"kind":"NodeResourcesFitArgs"}`)}, wantErr: `args.kind: Unsupported value: "NodeResourcesFitArgs"`},
		{name: "wrong version", obj: &runtime.Unknown{Raw: []byte(`{"apiVersion":"v1"}`)}, wantErr: `args.apiVersion: Unsupported value`},
		{name: "not json", obj: &runtime.Unknown{Raw: []byte(`{`)}, wantErr: "decoding GPUShareArgs"},
		{name: "other type", obj: &runtime.Unknown{}, check: func(a *GPUShareArgs) bool { return a.Policy == "fgd" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeArgs(tc.obj)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if !tc.check(got) {
				t.Fatalf("args = %+v", got)
			}
		})
	}
}
