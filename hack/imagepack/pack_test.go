package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// readTar returns name → content of every regular file in a tarball.
func readTar(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading tar: %v", err)
		}
		if h.Typeflag == tar.TypeDir {
			out[h.Name] = nil
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("reading %s: %v", h.Name, err)
		}
		out[h.Name] = b
	}
}

func TestWrite(t *testing.T) {
	var b bytes.Buffer
	img := Image{Tag: "gpushare.local/x:v1", Entrypoint: []string{"/bin/x"},
		Files: []File{{Path: "/bin/x", Mode: 0o755, Data: []byte("ELF")}}}
	if err := Write(&b, img); err != nil {
		t.Fatal(err)
	}
	outer := readTar(t, b.Bytes())
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(outer["manifest.json"], &manifest); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	if len(manifest) != 1 || len(manifest[0].Layers) != 1 {
		t.Fatalf("manifest = %+v, want one image with one layer", manifest)
	}
	if diff := cmp.Diff([]string{"gpushare.local/x:v1"}, manifest[0].RepoTags); diff != "" {
		t.Errorf("RepoTags (-want,+got):\n%s", diff)
	}
	layer := outer[manifest[0].Layers[0]]
	sum := sha256.Sum256(layer)
	var config struct {
		Config struct{ Entrypoint []string }
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(outer[manifest[0].Config], &config); err != nil {
		t.Fatalf("config: %v", err)
	}
	if diff := cmp.Diff([]string{"sha256:" + hex.EncodeToString(sum[:])}, config.RootFS.DiffIDs); diff != "" {
		t.Errorf("diff_ids must be the layer digest (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/bin/x"}, config.Config.Entrypoint); diff != "" {
		t.Errorf("Entrypoint (-want,+got):\n%s", diff)
	}
	files := readTar(t, layer)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	want := []string{"bin/", "bin/x", "dev/", "etc/", "proc/", "sys/", "tmp/", "var/", "var/run/"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("layer entries (-want,+got):\n%s", diff)
	}
	if got := string(files["bin/x"]); got != "ELF" {
		t.Errorf("bin/x = %q, want ELF", got)
	}
}

func TestRunRejectsBadArgs(t *testing.T) {
	for _, args := range [][]string{nil, {"noequals"}, {"f=relative"}} {
		err := run(t.TempDir()+"/o.tar", "t:v1", "", "", "amd64", args)
		if err == nil || !strings.Contains(err.Error(), "HOSTFILE") {
			t.Errorf("run(%q) error = %v, want one naming HOSTFILE", args, err)
		}
	}
}

// imageConfig writes img and returns its config's run settings.
func imageConfig(t *testing.T, img Image) map[string]json.RawMessage {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, img); err != nil {
		t.Fatal(err)
	}
	outer := readTar(t, b.Bytes())
	var manifest []struct{ Config string }
	if err := json.Unmarshal(outer["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v %+v", err, manifest)
	}
	var config struct{ Config map[string]json.RawMessage }
	if err := json.Unmarshal(outer[manifest[0].Config], &config); err != nil {
		t.Fatalf("config: %v", err)
	}
	return config.Config
}

func TestWriteUser(t *testing.T) {
	tests := []struct {
		name, user string
		want       string // the config's User as JSON; "" when absent
	}{
		{"non-root", "65534:65534", `"65534:65534"`},
		{"unset: the runtime's default", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := imageConfig(t, Image{Tag: "x:v1", Entrypoint: []string{"/x"}, User: tc.user,
				Files: []File{{Path: "/x", Mode: 0o755, Data: []byte("ELF")}}})
			if got := string(cfg["User"]); got != tc.want {
				t.Errorf("config User = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestRunRejectsBadUser(t *testing.T) {
	for _, u := range []string{"nobody", "65534:", ":65534", "1:2:3", "-1", "65534:staff"} {
		err := run(t.TempDir()+"/o.tar", "t:v1", "", u, "amd64", []string{"f=/f"})
		if err == nil || !strings.Contains(err.Error(), "numeric UID") {
			t.Errorf("run(-user %q) error = %v, want one asking for a numeric UID", u, err)
		}
	}
}

// TestWriteArch: the config names the architecture the binaries are built for, so an arm64
// node does not pull (or a runtime refuse) an image labelled amd64.
func TestWriteArch(t *testing.T) {
	tests := []struct{ name, arch, want string }{
		{"arm64", "arm64", "arm64"},
		{"amd64", "amd64", "amd64"},
		{"unset: amd64", "", "amd64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			img := Image{Tag: "x:v1", Arch: tc.arch, Entrypoint: []string{"/x"},
				Files: []File{{Path: "/x", Mode: 0o755, Data: []byte("ELF")}}}
			if err := Write(&b, img); err != nil {
				t.Fatal(err)
			}
			outer := readTar(t, b.Bytes())
			var manifest []struct{ Config string }
			if err := json.Unmarshal(outer["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
				t.Fatalf("manifest.json: %v %+v", err, manifest)
			}
			var config struct{ Architecture, OS string }
			if err := json.Unmarshal(outer[manifest[0].Config], &config); err != nil {
				t.Fatalf("config: %v", err)
			}
			if config.Architecture != tc.want || config.OS != "linux" {
				t.Errorf("config os/architecture = %s/%s, want linux/%s", config.OS, config.Architecture, tc.want)
			}
		})
	}
}

func TestRunRejectsBadArch(t *testing.T) {
	for _, a := range []string{"", "x86_64", "arm", "AMD64", "amd64 "} {
		err := run(t.TempDir()+"/o.tar", "t:v1", "", "", a, []string{"f=/f"})
		if err == nil || !strings.Contains(err.Error(), "-arch") {
			t.Errorf("run(-arch %q) error = %v, want one naming -arch", a, err)
		}
	}
}
