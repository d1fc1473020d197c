package manifests_test

import (
	"os"
	"strings"
	"testing"
)

// TestChartNotesRecommendBaseline: the chart's install notes tell the installer to hold tenant
// namespaces to Pod Security baseline, which refuses what no part of gpushare can stop
// (privileged containers and hostPath volumes reach every GPU of a node), whatever the
// values: the advice sits outside every template condition.
func TestChartNotesRecommendBaseline(t *testing.T) {
	raw, err := os.ReadFile(chartDir + "/templates/NOTES.txt")
	if err != nil {
		t.Fatal(err)
	}
	notes := string(raw)
	i := strings.Index(notes, "pod-security.kubernetes.io/enforce=baseline")
	if i < 0 {
		t.Fatal("templates/NOTES.txt does not recommend pod-security.kubernetes.io/enforce=baseline for tenant namespaces")
	}
	for _, what := range []string{"privileged containers", "hostPath"} {
		if !strings.Contains(notes[i:], what) {
			t.Errorf("templates/NOTES.txt recommends baseline without saying it refuses %s", what)
		}
	}
	// Every {{ if }} opened before the advice is closed before it.
	before := notes[:i]
	if opened, closed := strings.Count(before, "{{- if")+strings.Count(before, "{{ if"), strings.Count(before, "{{- end")+strings.Count(before, "{{ end"); opened != closed {
		t.Errorf("the baseline advice in templates/NOTES.txt sits inside a template condition (%d if, %d end before it)", opened, closed)
	}
}
