package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

var (
	// suiteEntry is a case of test/e2e/suite_test.go's suite table: {"Name", Case…}.
	suiteEntry = regexp.MustCompile(`(?m)^\t\{"([A-Za-z0-9]+)",`)
	// e2eName is an e2e case as the guides name it: TestE2E/<name>.
	e2eName = regexp.MustCompile(`TestE2E/\^?([A-Za-z0-9]+)`)
	// testName is any Go test name.
	testName = regexp.MustCompile(`(?:^|[^A-Za-z0-9/])Test([A-Za-z0-9]+)`)
)

// TestE2ECaseNames: the guides name e2e cases as `go test -run` selects them,
// TestE2E/<name>, and only cases the suite has. A bare Test<name> of a suite case (the
// form before the cases were subtests) is flagged with the name to write.
func TestE2ECaseNames(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "test", "e2e", "suite_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]bool{}
	for _, m := range suiteEntry.FindAllStringSubmatch(string(b), -1) {
		cases[m[1]] = true
	}
	if len(cases) < 10 {
		t.Fatalf("test/e2e/suite_test.go: read %d cases from the suite table; has its form changed?", len(cases))
	}
	for _, l := range guides(t) {
		for _, m := range e2eName.FindAllStringSubmatch(l.text, -1) {
			if !cases[m[1]] {
				t.Errorf("%s: e2e case %q is not in test/e2e/suite_test.go's suite", l, m[1])
			}
		}
		for _, m := range testName.FindAllStringSubmatch(l.text, -1) {
			if cases[m[1]] {
				t.Errorf("%s: Test%s is the e2e case TestE2E/%s (go test -run selects it so)", l, m[1], m[1])
			}
		}
	}
}
