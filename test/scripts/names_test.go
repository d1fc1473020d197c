package scripts

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TestScriptNamesMatchProtocol: the protocol names the local-cluster scripts spell (shell
// cannot import pkg/gpushare) are the ones pkg/gpushare defines.
func TestScriptNamesMatchProtocol(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "hack", "lib", "cluster.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ variable, want string }{
		{"BACKEND_LABEL", gpushare.LabelBackend},
		{"DRA_DRIVER", gpushare.DRADriverName},
	} {
		m := regexp.MustCompile(`(?m)^` + tc.variable + `=(\S+)$`).FindSubmatch(raw)
		if m == nil {
			t.Errorf("hack/lib/cluster.sh: no %s=... line", tc.variable)
			continue
		}
		if got := string(m[1]); got != tc.want {
			t.Errorf("hack/lib/cluster.sh: %s=%s, want %s (pkg/gpushare)", tc.variable, got, tc.want)
		}
	}
}
