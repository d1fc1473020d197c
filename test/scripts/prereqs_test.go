package scripts

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeNamesPrerequisites: the README's prerequisites name the Debian package of every
// host tool hack/lib/prereqs.sh declares beyond the base system, so a new user installs
// what make doctor would ask for.
func TestReadmeNamesPrerequisites(t *testing.T) {
	lines := bashArray(t, "hack/lib/prereqs.sh", "HOST_TOOLS")
	entries := regexp.MustCompile(`"(\S+) (\S+) (\S+)"`).FindAllStringSubmatch(strings.Join(lines, " "), -1)
	if len(entries) < 10 {
		t.Fatalf("hack/lib/prereqs.sh HOST_TOOLS: %d entries read, want the full table", len(entries))
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, prereqs, ok := strings.Cut(string(readme), "### Prerequisites")
	if !ok {
		t.Fatal("README.md has no ### Prerequisites section")
	}
	prereqs, _, _ = strings.Cut(prereqs, "\n## ")
	for _, e := range entries {
		cmd, pkg, need := e[1], e[2], e[3]
		if need == "base" || pkg == "go.dev/dl" {
			continue
		}
		if !strings.Contains(prereqs, "`"+pkg+"`") {
			t.Errorf("README.md's prerequisites lack the package `%s` (%s, needed by %s in hack/lib/prereqs.sh)", pkg, cmd, need)
		}
	}
}
