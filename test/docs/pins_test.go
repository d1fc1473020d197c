package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the repository root, two folders above this package.
const repoRoot = "../.."

// pinsTable is the one place in the docs that writes the pinned versions, under pinsHeading.
const (
	pinsTable   = "docs/local-cluster.md"
	pinsHeading = "## Pinned versions"
)

// semver is the capture every mention pattern ends with: a version with a patch number.
const semver = `v?(\d+\.\d+\.\d+)`

// pin is one pinned component: where its version is written, and how prose names a version of it.
type pin struct {
	name     string         // the start of its row's first cell in pinsTable
	file     string         // repository-relative file holding the pin
	source   *regexp.Regexp // its one group is the pinned version in file
	mentions []string       // patterns of prose naming a version of it, each ending in semver
}

var pins = []pin{
	{name: "Kubernetes", file: "hack/build-k8s.sh", source: regexp.MustCompile(`(?m)^K8S_VERSION=\$\{K8S_VERSION:-` + semver + `\}`),
		mentions: []string{`(?i)\bkubernetes\s+`, `(?i)\bkube-(?:apiserver|controller-manager|scheduler)\s+`, `(?i)\bkube(?:let|ctl)\s+`, `k8s\.io/kubernetes[\s@]+`}},
	{name: "etcd", file: "hack/build-k8s.sh", source: regexp.MustCompile(`(?m)^ETCD_VERSION=\$\{ETCD_VERSION:-` + semver + `\}`),
		mentions: []string{`(?i)\betcd\s+`}},
	{name: "kwok", file: "hack/build-k8s.sh", source: regexp.MustCompile(`(?m)^KWOK_VERSION=\$\{KWOK_VERSION:-` + semver + `\}`),
		mentions: []string{`(?i)\bkwok\s+`}},
	{name: "containerd", file: "hack/build-k8s.sh", source: regexp.MustCompile(`(?m)^CONTAINERD_VERSION=\$\{CONTAINERD_VERSION:-` + semver + `\}`),
		mentions: []string{`(?i)\bcontainerd\s+`}},
	{name: "Helm", file: "hack/tools/helm/go.mod", source: regexp.MustCompile(`(?m)^\s*helm\.sh/helm/v4 ` + semver),
		mentions: []string{`(?i)\bhelm\s+`, `helm\.sh/helm/v4[\s@]+`}},
	{name: "prometheus-operator", file: "hack/tools.sh", source: regexp.MustCompile(`(?m)^PROMETHEUS_OPERATOR_VERSION=` + semver),
		mentions: []string{`(?i)\bprometheus-operator\s+`}},
	{name: "cert-manager", file: "hack/tools.sh", source: regexp.MustCompile(`(?m)^CERT_MANAGER_VERSION=` + semver),
		mentions: []string{`(?i)\bcert-manager\s+`}},
	{name: "Kueue", file: "hack/tools.sh", source: regexp.MustCompile(`(?m)^KUEUE_VERSION=` + semver),
		mentions: []string{`(?i)\bkueue\s+`}},
	{name: "goreleaser", file: "hack/tools/go.mod", source: regexp.MustCompile(`(?m)^\s*github\.com/goreleaser/goreleaser/v2 ` + semver),
		mentions: []string{`(?i)\bgoreleaser\s+`, `goreleaser/v2[\s@]+`}},
}

// pinned reads every pin's version (without its leading v) from its file.
func pinned(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range pins {
		b, err := os.ReadFile(filepath.Join(repoRoot, p.file))
		if err != nil {
			t.Fatalf("reading the pin of %s: %v", p.name, err)
		}
		m := p.source.FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s: no pin of %s matches %s; update pins in test/docs", p.file, p.name, p.source)
		}
		out[p.name] = string(m[1])
	}
	return out
}

// docLine is one line of a guide, named file:line in failures.
type docLine struct {
	file string // repository-relative
	n    int
	text string
}

func (l docLine) String() string { return fmt.Sprintf("%s:%d", l.file, l.n) }

// guides returns the lines of README.md, docs/**/*.md and deploy/**/README.md. Design notes
// (docs/design/) are left out: their measurements and source readings name the versions they
// were made with, which stay true when a pin moves.
func guides(t *testing.T) []docLine {
	t.Helper()
	files := []string{"README.md"}
	for _, dir := range []string{"docs", "deploy"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(repoRoot, path)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			switch {
			case d.IsDir() && rel == "docs/design":
				return filepath.SkipDir
			case d.IsDir():
			case dir == "docs" && strings.HasSuffix(rel, ".md"), dir == "deploy" && d.Name() == "README.md":
				files = append(files, rel)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("listing %s: %v", dir, err)
		}
	}
	var out []docLine
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		for i, text := range strings.Split(string(b), "\n") {
			out = append(out, docLine{file: f, n: i + 1, text: text})
		}
	}
	return out
}

// tableRows returns the rows of pinsTable's table under pinsHeading, by line number, each
// as its trimmed cells. Fails when the heading or the table is missing.
func tableRows(t *testing.T, lines []docLine) map[int][]string {
	t.Helper()
	rows := map[int][]string{}
	in := false
	for _, l := range lines {
		if l.file != pinsTable {
			continue
		}
		switch {
		case l.text == pinsHeading:
			in = true
		case in && strings.HasPrefix(l.text, "#"):
			in = false
		case in && strings.HasPrefix(l.text, "|") && !strings.HasPrefix(l.text, "|---"):
			var cells []string
			for _, c := range strings.Split(strings.Trim(l.text, "|"), "|") {
				cells = append(cells, strings.TrimSpace(c))
			}
			rows[l.n] = cells
		}
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no table under %q", pinsTable, pinsHeading)
	}
	return rows
}

// TestPinsTable: the table of docs/local-cluster.md has one row per pin, with its version.
func TestPinsTable(t *testing.T) {
	want := pinned(t)
	rows := tableRows(t, guides(t))
	seen := map[string]bool{}
	for n, cells := range rows {
		if len(cells) < 2 || cells[0] == "component" {
			continue
		}
		var p *pin
		for i := range pins {
			if strings.HasPrefix(cells[0], pins[i].name) {
				p = &pins[i]
			}
		}
		if p == nil {
			t.Errorf("%s:%d: row %q names no pin test/docs reads; add it to pins", pinsTable, n, cells[0])
			continue
		}
		seen[p.name] = true
		if got := strings.TrimPrefix(cells[1], "v"); got != want[p.name] {
			t.Errorf("%s:%d: %s %s, but %s pins v%s", pinsTable, n, p.name, cells[1], p.file, want[p.name])
		}
	}
	for _, p := range pins {
		if !seen[p.name] {
			t.Errorf("%s: no row for %s (pinned v%s in %s)", pinsTable, p.name, want[p.name], p.file)
		}
	}
}

// TestPinsWrittenOnce: outside the table no guide names a version of a pinned component
// other than its pin, nor repeats a pinned version: the guides point at the table instead.
func TestPinsWrittenOnce(t *testing.T) {
	want := pinned(t)
	lines := guides(t)
	table := tableRows(t, lines)
	for _, p := range pins {
		v := want[p.name]
		literals := []string{v}
		if p.name == "Kubernetes" { // the staging modules' tag of the same release
			literals = append(literals, "0."+strings.TrimPrefix(v, "1."))
		}
		// Kubernetes' release numbers are distinctive; another pin's bare version (0.17.0)
		// counts only on a line that names the component.
		named := regexp.MustCompile(`(?i)\b` + regexp.QuoteMeta(p.name) + `\b`)
		var repeat []*regexp.Regexp
		for _, lit := range literals {
			repeat = append(repeat, regexp.MustCompile(`(?:^|[^\d.])v?`+regexp.QuoteMeta(lit)+`(?:$|[^\d.]|\.(?:$|\D))`))
		}
		var mention []*regexp.Regexp
		for _, m := range p.mentions {
			mention = append(mention, regexp.MustCompile(m+semver))
		}
		for _, l := range lines {
			if _, ok := table[l.n]; ok && l.file == pinsTable {
				continue
			}
			for _, re := range mention {
				for _, m := range re.FindAllStringSubmatch(l.text, -1) {
					if m[1] != v {
						t.Errorf("%s: %q names %s %s, but %s pins v%s: point at %s#pinned-versions for the pin, or write another release as an override (K8S_VERSION=…)",
							l, m[0], p.name, m[1], p.file, v, pinsTable)
					}
				}
			}
			for _, re := range repeat {
				if re.MatchString(l.text) && (p.name == "Kubernetes" || named.MatchString(l.text)) {
					t.Errorf("%s: repeats the pinned version of %s, v%s (%s): write it only in the table of %s and point at it",
						l, p.name, v, p.file, pinsTable)
				}
			}
		}
	}
}

// TestGoModulesFollowK8sVersion: the Go modules build against the Kubernetes release the
// local cluster runs, as README.md and docs/local-cluster.md say.
func TestGoModulesFollowK8sVersion(t *testing.T) {
	k8s := pinned(t)["Kubernetes"]
	staging := "0." + strings.TrimPrefix(k8s, "1.")
	for _, c := range []struct{ file, module, want string }{
		{"go.mod", "k8s.io/api", staging},
		{"go.mod", "k8s.io/client-go", staging},
		{"cmd/gpushare-scheduler/go.mod", "k8s.io/kubernetes", k8s},
	} {
		b, err := os.ReadFile(filepath.Join(repoRoot, c.file))
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(c.module) + ` v(\S+)`)
		m := re.FindSubmatch(b)
		if m == nil {
			t.Errorf("%s: no requirement of %s", c.file, c.module)
			continue
		}
		if string(m[1]) != c.want {
			t.Errorf("%s: %s v%s, but hack/build-k8s.sh pins Kubernetes v%s (want v%s)", c.file, c.module, m[1], k8s, c.want)
		}
	}
}
