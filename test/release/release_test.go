// Package release_test checks the invariants of .goreleaser.yaml that `make dist` relies on,
// without building goreleaser: every command is built and versioned, the kubectl plugin's
// archives carry one binary at their root under the names the krew manifest points at, and
// nothing publishes.
package release_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// config is the part of .goreleaser.yaml the tests read.
type config struct {
	Version  int
	Env      []string
	Snapshot struct {
		VersionTemplate string `json:"version_template"`
	}
	Builds []struct {
		ID      string
		Dir     string
		Main    string
		Binary  string
		Goos    []string
		Goarch  []string
		Ldflags []string
		Tags    []string
		Ignore  []struct{ Goos, Goarch string }
	}
	Archives []archive
	Checksum struct {
		NameTemplate string `json:"name_template"`
		Algorithm    string
	}
	Krews []struct {
		Name        string
		IDs         []string
		SkipUpload  any    `json:"skip_upload"`
		URLTemplate string `json:"url_template"`
	}
	Release struct {
		Disable any
	}
	Dockers []any
}

// archive is one entry of archives.
type archive struct {
	ID              string
	IDs             []string
	Formats         []string
	FormatOverrides []struct {
		Goos    string
		Formats []string
	} `json:"format_overrides"`
	NameTemplate string `json:"name_template"`
}

// TestMain runs the tests from the repository root, where goreleaser reads its config.
func TestMain(m *testing.M) {
	if err := os.Chdir("../.."); err != nil {
		fmt.Fprintln(os.Stderr, "release tests:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func load(t *testing.T) config {
	t.Helper()
	raw, err := os.ReadFile(".goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Lenient: goreleaser checks its own schema (goreleaser check); sections these tests
	// do not read may come and go.
	var c config
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	if c.Version != 2 {
		t.Fatalf(".goreleaser.yaml: version %d, want 2 (goreleaser v2's schema)", c.Version)
	}
	return c
}

// releaseVersion is the VERSION file: the tag a release is cut from.
func releaseVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("VERSION")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// render applies a goreleaser name template to the fields these templates use.
func render(t *testing.T, tmpl string, fields map[string]string) string {
	t.Helper()
	tp, err := template.New("").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		t.Fatalf("template %q: %v", tmpl, err)
	}
	var b bytes.Buffer
	if err := tp.Execute(&b, fields); err != nil {
		t.Fatalf("template %q: %v", tmpl, err)
	}
	return b.String()
}

const versionLdflag = "-X github.com/gpushare/gpushare/pkg/version.Version={{ .Env.DIST_VERSION }}"

// TestBuilds: each command in cmd/ is built under its own name, for the platforms the
// release promises, with the version make build stamps.
func TestBuilds(t *testing.T) {
	c := load(t)
	dirs, err := filepath.Glob("cmd/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no commands in cmd/ (%v)", err)
	}
	all := [][]string{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}
	want := map[string][][]string{
		"extender":                 all,
		"share-plugin":             all,
		"kubectl-inspect-gpushare": append(slices.Clone(all), []string{"windows", "amd64"}),
		// kube-scheduler and the OCI runtimes that run the hook: linux nodes only.
		"gpushare-scheduler":  {{"linux", "amd64"}, {"linux", "arm64"}},
		"gpushare-limit-hook": {{"linux", "amd64"}, {"linux", "arm64"}},
		// mount namespaces and tmpfs on linux nodes.
		"gpushare-mps": {{"linux", "amd64"}, {"linux", "arm64"}},
		// Run in containers on linux nodes; the static variant goes into the share-plugin image.
		"gpushare-probe":        {{"linux", "amd64"}, {"linux", "arm64"}},
		"gpushare-probe-static": {{"linux", "amd64"}, {"linux", "arm64"}},
	}
	// Builds of a command under another name, with the build tags that make them differ.
	variants := map[string]struct {
		cmd  string
		tags []string
	}{"gpushare-probe-static": {cmd: "gpushare-probe", tags: []string{"nocuda"}}}
	for _, d := range dirs {
		if _, ok := want[filepath.Base(d)]; !ok {
			t.Errorf("%s: a command the release does not build; add it to .goreleaser.yaml and here", d)
		}
	}
	built := map[string]bool{}
	for _, b := range c.Builds {
		t.Run(b.ID, func(t *testing.T) {
			platforms, ok := want[b.ID]
			if !ok {
				t.Fatalf("build %q is no command in cmd/", b.ID)
			}
			built[b.ID] = true
			if b.Binary != b.ID {
				t.Errorf("binary %q, want %q (the name users and images run)", b.Binary, b.ID)
			}
			cmd, tags := b.ID, []string(nil)
			if v, ok := variants[b.ID]; ok {
				cmd, tags = v.cmd, v.tags
			}
			if src := filepath.Join(b.Dir, b.Main); src != "cmd/"+cmd {
				t.Errorf("builds %s, want cmd/%s", src, cmd)
			}
			if !slices.Equal(b.Tags, tags) {
				t.Errorf("tags %v, want %v", b.Tags, tags)
			}
			var got [][]string
			for _, os := range b.Goos {
				for _, arch := range b.Goarch {
					ignored := slices.ContainsFunc(b.Ignore, func(i struct{ Goos, Goarch string }) bool {
						return i.Goos == os && i.Goarch == arch
					})
					if !ignored {
						got = append(got, []string{os, arch})
					}
				}
			}
			less := func(a, b []string) int { return strings.Compare(strings.Join(a, "/"), strings.Join(b, "/")) }
			slices.SortFunc(got, less)
			wantP := slices.Clone(platforms)
			slices.SortFunc(wantP, less)
			if diff := cmp.Diff(wantP, got); diff != "" {
				t.Errorf("platforms (-want,+got):\n%s", diff)
			}
			flags := strings.Join(b.Ldflags, " ")
			if !strings.Contains(flags, versionLdflag) {
				t.Errorf("ldflags %q do not set %s", flags, versionLdflag)
			}
			if b.ID == "gpushare-scheduler" {
				// Its --version reports the kube-scheduler it is built from (Makefile SCHED_LDFLAGS).
				for _, v := range []string{"gitVersion={{ .Env.SCHED_K8S }}", "gitMajor=1", "gitMinor="} {
					if !strings.Contains(flags, "-X k8s.io/component-base/version."+v) {
						t.Errorf("ldflags %q do not set component-base version.%s", flags, v)
					}
				}
				if b.Dir != "cmd/gpushare-scheduler" {
					t.Errorf("dir %q, want cmd/gpushare-scheduler: it builds on its own go.mod", b.Dir)
				}
			}
		})
	}
	for id := range want {
		if !built[id] {
			t.Errorf("no build for cmd/%s", id)
		}
	}
	if !slices.Contains(c.Env, "GOWORK=off") {
		t.Errorf("env %v lacks GOWORK=off: each module must build on its own go.mod", c.Env)
	}
}

// TestKrewManifest: the krew manifest is generated from the plugin's archives, one binary
// each, under the plugin name users install, and its URIs are the release's download paths
// of those archives.
func TestKrewManifest(t *testing.T) {
	c := load(t)
	if len(c.Krews) != 1 {
		t.Fatalf("%d krews entries, want 1", len(c.Krews))
	}
	k := c.Krews[0]
	// Krew links plugin inspect-gpushare as kubectl-inspect_gpushare: `kubectl inspect-gpushare`.
	if k.Name != "inspect-gpushare" {
		t.Errorf("krew plugin name %q, want inspect-gpushare", k.Name)
	}
	if fmt.Sprint(k.SkipUpload) != "true" {
		t.Errorf("krews skip_upload %v, want true: the manifest stays in dist/", k.SkipUpload)
	}
	var a *archive
	for i := range c.Archives {
		if slices.Equal(k.IDs, []string{c.Archives[i].ID}) {
			a = &c.Archives[i]
		}
	}
	if a == nil {
		t.Fatalf("krews ids %v name no single archive", k.IDs)
	}
	// Krew installs one binary per platform: the archive holds the plugin's build only.
	if diff := cmp.Diff([]string{"kubectl-inspect-gpushare"}, a.IDs); diff != "" {
		t.Errorf("archive %s builds (-want,+got):\n%s", a.ID, diff)
	}
	if diff := cmp.Diff([]string{"tar.gz"}, a.Formats); diff != "" {
		t.Errorf("archive %s formats (-want,+got):\n%s", a.ID, diff)
	}
	v := releaseVersion(t)
	for _, p := range []struct{ os, arch, ext string }{
		{"linux", "amd64", ".tar.gz"}, {"linux", "arm64", ".tar.gz"},
		{"darwin", "amd64", ".tar.gz"}, {"darwin", "arm64", ".tar.gz"},
		{"windows", "amd64", ".zip"},
	} {
		ext := p.ext
		for _, o := range a.FormatOverrides {
			if o.Goos == p.os && len(o.Formats) == 1 {
				ext = "." + o.Formats[0]
			}
		}
		if ext != p.ext {
			t.Errorf("%s archive is %s, want %s (krew unpacks tar.gz and zip; zip is Windows' own)", p.os, ext, p.ext)
		}
		// goreleaser's .Version is the tag without its v.
		name := render(t, a.NameTemplate, map[string]string{"Version": strings.TrimPrefix(v, "v"), "Os": p.os, "Arch": p.arch}) + ext
		wantName := fmt.Sprintf("kubectl-inspect-gpushare_%s_%s_%s%s", v, p.os, p.arch, p.ext)
		if name != wantName {
			t.Errorf("archive name %q, want %q", name, wantName)
		}
		uri := render(t, k.URLTemplate, map[string]string{"Version": strings.TrimPrefix(v, "v"), "ArtifactName": name})
		wantURI := "https://github.com/gpushare/gpushare/releases/download/" + v + "/" + wantName
		if uri != wantURI {
			t.Errorf("krew uri %q, want %q (the release's download path of the archive)", uri, wantURI)
		}
	}
}

// TestOneKrewManifest: the manifest exists only as goreleaser writes it into dist/, with
// real checksums; a hand-kept copy in the repository would drift from the archives.
func TestOneKrewManifest(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// Build outputs and caches (.git, .cache, _output, dist, bin) hold no sources.
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || path == "dist" || path == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(raw, []byte("apiVersion: krew.googlecontainertools.github.com")) {
			t.Errorf("%s: a krew manifest in the repository; make dist writes dist/krew/inspect-gpushare.yaml", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNoPublishing: make dist only writes dist/; images are packed by hack/dist.sh (there is
// no docker engine for goreleaser's dockers), and every artefact is named by the version.
func TestNoPublishing(t *testing.T) {
	c := load(t)
	if fmt.Sprint(c.Release.Disable) != "true" {
		t.Errorf("release.disable %v, want true", c.Release.Disable)
	}
	if len(c.Dockers) != 0 {
		t.Errorf("dockers section present: goreleaser cannot build images here (hack/dist.sh packs them)")
	}
	if c.Checksum.Algorithm != "sha256" {
		t.Errorf("checksum algorithm %q, want sha256", c.Checksum.Algorithm)
	}
	named := regexp.MustCompile(`\{\{ *\.Version *\}\}`)
	for what, tmpl := range map[string]string{"checksum": c.Checksum.NameTemplate} {
		if !named.MatchString(tmpl) {
			t.Errorf("%s name %q does not carry the version", what, tmpl)
		}
	}
	for _, a := range c.Archives {
		if !named.MatchString(a.NameTemplate) {
			t.Errorf("archive %s name %q does not carry the version", a.ID, a.NameTemplate)
		}
	}
	raw, err := os.ReadFile(".goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(":latest")) {
		t.Errorf(".goreleaser.yaml mentions :latest; every artefact is tagged with the version")
	}
}
