package manifests_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// version is the release version in the repository's VERSION file.
func version(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(b))
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(v) {
		t.Fatalf("VERSION holds %q, want vMAJOR.MINOR.PATCH", v)
	}
	return v
}

// TestImageTags: every workload in deploy/ runs a gpushare image by the release tag in
// VERSION (the tag `make image` builds), never a moving tag such as latest.
func TestImageTags(t *testing.T) {
	want := version(t)
	var images []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && path == "helm" {
			return filepath.SkipDir // templates, not YAML: helm_test.go checks what they render
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				return err
			}
			var spec *corev1.PodSpec
			switch tm.Kind {
			case "Deployment":
				var o appsv1.Deployment
				if err := yaml.Unmarshal(doc, &o); err != nil {
					return err
				}
				spec = &o.Spec.Template.Spec
			case "DaemonSet":
				var o appsv1.DaemonSet
				if err := yaml.Unmarshal(doc, &o); err != nil {
					return err
				}
				spec = &o.Spec.Template.Spec
			default:
				continue
			}
			for _, c := range append(spec.InitContainers, spec.Containers...) {
				images = append(images, path+": "+c.Image)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// The images hack/build-component-images.sh (make image) builds: each one is deployed.
	built := map[string]bool{"gpushare/extender": false, "gpushare/share-plugin": false, "gpushare/gpushare-scheduler": false}
	for _, img := range images {
		path, ref, _ := strings.Cut(img, ": ")
		name, tag, ok := strings.Cut(ref, ":")
		if !strings.HasPrefix(name, "gpushare/") {
			continue // examples run their own images
		}
		if _, known := built[name]; known {
			built[name] = true
		}
		if !ok || tag != want {
			t.Errorf("%s runs %s, want tag %s (VERSION)", path, ref, want)
		}
	}
	for name, found := range built {
		if !found {
			t.Errorf("no workload in deploy/ runs %s (found %v)", name, images)
		}
	}
}

// TestDockerfileBasesPinned: every base image of a Dockerfile in deploy/ is pinned by
// digest, so a moved tag cannot change what is built.
func TestDockerfileBasesPinned(t *testing.T) {
	files, err := filepath.Glob("*/Dockerfile")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Dockerfile in deploy/*/ (%v)", err)
	}
	pinned := regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		args := map[string]string{}
		stages := map[string]bool{}
		for _, line := range strings.Split(string(raw), "\n") {
			fields := strings.Fields(line)
			switch {
			case len(fields) == 2 && fields[0] == "ARG":
				if k, v, ok := strings.Cut(fields[1], "="); ok {
					args[k] = v
				}
			case len(fields) >= 2 && fields[0] == "FROM":
				base := fields[1]
				for k, v := range args {
					base = strings.ReplaceAll(base, "${"+k+"}", v)
				}
				if !stages[base] && !pinned.MatchString(base) {
					t.Errorf("%s: %q: base image %s is not pinned by digest", f, line, base)
				}
				if len(fields) == 4 && strings.EqualFold(fields[2], "AS") {
					stages[fields[3]] = true // a later FROM may start from this stage
				}
			}
		}
	}
}
