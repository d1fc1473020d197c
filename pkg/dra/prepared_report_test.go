package dra

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TestPreparedReport: /prepared lists the checkpoint's claims by namespace and name, each
// result's units added up per card, and an empty list when nothing is prepared.
func TestPreparedReport(t *testing.T) {
	tests := []struct {
		name   string
		claims []*resourceapi.ResourceClaim
		want   []gpushare.DRAPreparedClaim
	}{
		{name: "none", want: []gpushare.DRAPreparedClaim{}},
		{
			name: "two claims, one on two cards and one with two results on a card",
			claims: []*resourceapi.ResourceClaim{
				claim("bbbbbbbb-0000-4000-8000-000000000002", "b", result("gpu", "gpu-0", "4Gi"), result("gpu", "gpu-1", "2Gi")),
				claim("bbbbbbbb-0000-4000-8000-000000000001", "a", result("one", "gpu-1", "1Gi"), result("two", "gpu-1", "3Gi")),
			},
			want: []gpushare.DRAPreparedClaim{
				{UID: "bbbbbbbb-0000-4000-8000-000000000001", Namespace: "team-a", Name: "a", Cards: gpushare.CardUnits{1: 4}},
				{UID: "bbbbbbbb-0000-4000-8000-000000000002", Namespace: "team-a", Name: "b", Cards: gpushare.CardUnits{0: 4, 1: 2}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newTestDriver(t, testConfig(t.TempDir()))
			if len(tt.claims) > 0 {
				res, err := d.PrepareResourceClaims(context.Background(), tt.claims)
				if err != nil {
					t.Fatal(err)
				}
				for uid, r := range res {
					if r.Err != nil {
						t.Fatalf("prepare %s: %v", uid, r.Err)
					}
				}
			}
			srv := httptest.NewServer(d.handler(&probes{}, newMetrics()))
			defer srv.Close()
			code, body := get(t, srv.URL+gpushare.DRAPreparedPath)
			if code != http.StatusOK {
				t.Fatalf("%s = %d %q", gpushare.DRAPreparedPath, code, body)
			}
			var got gpushare.DRAPreparedReport
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("decoding %q: %v", body, err)
			}
			want := gpushare.DRAPreparedReport{Node: testNode, Claims: tt.want}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s = %+v, want %+v", gpushare.DRAPreparedPath, got, want)
			}
		})
	}
}
