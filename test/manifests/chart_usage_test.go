package manifests_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestChartGrantUnderused: the alert on containers far below their GPU memory grant takes its
// threshold and duration from values (defaults 0.2 and 6h), compares used with a non-zero
// grant per container and card, and is off with threshold 0.
func TestChartGrantUnderused(t *testing.T) {
	tests := []struct {
		name      string
		sets      []string
		wantExpr  string // "" : no alert
		wantFor   string
		wantError string
	}{
		{name: "defaults", wantExpr: "< 0.2", wantFor: "6h"},
		{name: "set", sets: []string{"monitoring.prometheusRule.grantUnderused.threshold=0.05", "monitoring.prometheusRule.grantUnderused.for=12h"}, wantExpr: "< 0.05", wantFor: "12h"},
		{name: "off", sets: []string{"monitoring.prometheusRule.grantUnderused.threshold=0"}},
		{name: "above the grant", sets: []string{"monitoring.prometheusRule.grantUnderused.threshold=1.5"}, wantError: "grantUnderused/threshold"},
		{name: "not a duration", sets: []string{"monitoring.prometheusRule.grantUnderused.for=six hours"}, wantError: "grantUnderused/for"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sets := append([]string{"monitoring.prometheusRule.enabled=true"}, tc.sets...)
			if tc.wantError != "" {
				_, err := renderErr(t, "kube-system", sets, withPrometheusOperator)
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("render error %v, want one containing %q", err, tc.wantError)
				}
				return
			}
			c := render(t, "kube-system", sets, withPrometheusOperator)
			var got *alertRule
			for _, r := range alertRules(t, c) {
				if r.Alert == "GPUShareGrantUnderused" {
					got = &r
				}
			}
			if tc.wantExpr == "" {
				if got != nil {
					t.Fatalf("alert rendered with threshold 0: %+v", *got)
				}
				return
			}
			if got == nil {
				t.Fatal("no GPUShareGrantUnderused alert")
			}
			for _, want := range []string{
				`gpushare_container_gpu_memory_used_bytes{job="share-plugin-metrics"}`,
				`(gpushare_container_gpu_memory_granted_bytes{job="share-plugin-metrics"} > 0)`,
				tc.wantExpr,
			} {
				if !strings.Contains(got.Expr, want) {
					t.Errorf("expr %q lacks %q", got.Expr, want)
				}
			}
			if got.For != tc.wantFor {
				t.Errorf("for %q, want %q", got.For, tc.wantFor)
			}
		})
	}
}

// TestDashboardPodViews: the dashboard has namespace and pod variables, and panels per
// namespace and per pod on the usage watchdog's container metrics that honour them.
func TestDashboardPodViews(t *testing.T) {
	b, err := os.ReadFile(chartDir + "/dashboards/gpushare.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Templating struct {
			List []struct {
				Name string `json:"name"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	for _, v := range []string{"namespace", "pod"} {
		if !vars[v] {
			t.Errorf("dashboard lacks the variable %s", v)
		}
	}
	ids := map[int]bool{}
	// Each metric must be shown by namespace or by pod, filtered by the variables.
	seen := map[string]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		for _, tg := range p.Targets {
			for _, m := range []string{"gpushare_container_gpu_memory_used_bytes", "gpushare_container_gpu_memory_granted_bytes",
				"gpushare_container_gpu_sm_utilization_ratio", "gpushare_container_gpu_sm_utilization_per_share_ratio"} {
				if !strings.Contains(tg.Expr, m+"{") {
					continue
				}
				if !strings.Contains(tg.Expr, `namespace=~"$namespace"`) {
					t.Errorf("panel %q: %s not filtered by $namespace", p.Title, tg.Expr)
				}
				switch {
				case strings.Contains(tg.Expr, "sum by (namespace)"):
					seen[m+" namespace"] = true
				case strings.Contains(tg.Expr, `pod=~"$pod"`):
					seen[m+" pod"] = true
				}
			}
		}
	}
	for _, want := range []string{
		"gpushare_container_gpu_memory_used_bytes namespace", "gpushare_container_gpu_memory_granted_bytes namespace",
		"gpushare_container_gpu_sm_utilization_ratio namespace",
		"gpushare_container_gpu_memory_used_bytes pod", "gpushare_container_gpu_memory_granted_bytes pod",
		"gpushare_container_gpu_sm_utilization_ratio pod", "gpushare_container_gpu_sm_utilization_per_share_ratio pod",
	} {
		if !seen[want] {
			t.Errorf("no panel shows %s", want)
		}
	}
}
