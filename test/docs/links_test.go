package docs

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// link is a Markdown link or image target: ](target).
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestRelativeLinks: every relative link of README.md, docs/ (design notes too) and the
// READMEs of deploy/ leads to a file that exists and, with a #fragment into a Markdown file,
// to one of its headings.
func TestRelativeLinks(t *testing.T) {
	files := []string{"README.md"}
	for _, dir := range []string{"docs", "deploy"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(repoRoot, p)
			if err != nil {
				return err
			}
			if rel = filepath.ToSlash(rel); strings.HasSuffix(rel, ".md") && (dir == "docs" || d.Name() == "README.md") {
				files = append(files, rel)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("listing %s: %v", dir, err)
		}
	}
	anchors := map[string]map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, frag, _ := strings.Cut(target, "#")
				dest := f
				if file != "" {
					dest = path.Clean(path.Join(path.Dir(f), file))
				}
				where := f + ":" + strconv.Itoa(i+1)
				if _, err := os.Stat(filepath.Join(repoRoot, dest)); err != nil {
					t.Errorf("%s: link %s: no file %s", where, target, dest)
					continue
				}
				if frag == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				if anchors[dest] == nil {
					anchors[dest] = headingAnchors(t, dest)
				}
				if !anchors[dest][frag] {
					t.Errorf("%s: link %s: %s has no heading with anchor #%s", where, target, dest, frag)
				}
			}
		}
	}
}

// headingAnchors returns the anchors GitHub gives the headings of a Markdown file: lower case,
// punctuation but '-' and '_' dropped, spaces as '-', "-1", "-2" … after a repeated one.
func headingAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, file))
	if err != nil {
		t.Fatal(err)
	}
	drop := regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if fenced || !strings.HasPrefix(line, "#") || !ok {
			continue
		}
		a := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(title)), ""), " ", "-")
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// docPath is a repository path into docs/ written in a source file, comment or manifest.
var docPath = regexp.MustCompile(`(?:^|[^\w./-])(docs/[\w./-]*\w\.(?:md|svg))`)

// TestDocPathsExist: every docs/….md or .svg path that Go code, scripts, manifests and docs
// name exists, so that moving a document means fixing what points at it.
func TestDocPathsExist(t *testing.T) {
	// Build outputs and artefacts (_output, test/e2e/_artifacts, dist, bin) are not sources.
	skip := map[string]bool{"dist": true, "bin": true, "node_modules": true}
	exts := map[string]bool{".go": true, ".sh": true, ".yaml": true, ".yml": true, ".md": true, ".tpl": true, ".txt": true}
	err := filepath.WalkDir(repoRoot, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != repoRoot && (skip[d.Name()] || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !exts[filepath.Ext(p)] && d.Name() != "Makefile" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range docPath.FindAllStringSubmatch(line, -1) {
				if _, err := os.Stat(filepath.Join(repoRoot, m[1])); err != nil {
					t.Errorf("%s:%d: names %s, which does not exist", filepath.ToSlash(rel), i+1, m[1])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking the repository: %v", err)
	}
}

// TestIndexListsEveryDoc: docs/README.md links every Markdown file of docs/, design notes too.
func TestIndexListsEveryDoc(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs/README.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range link.FindAllStringSubmatch(string(b), -1) {
		file, _, _ := strings.Cut(m[1], "#")
		listed[path.Clean(file)] = true
	}
	docs := filepath.Join(repoRoot, "docs")
	err = filepath.WalkDir(docs, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") || d.Name() == "README.md" {
			return err
		}
		rel, err := filepath.Rel(docs, p)
		if err == nil && !listed[filepath.ToSlash(rel)] {
			t.Errorf("docs/README.md does not list docs/%s: add a line for it", filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatalf("walking docs: %v", err)
	}
}
