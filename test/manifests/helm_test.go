package manifests_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// chartDir is the chart, relative to deploy/ (TestMain's working directory).
const chartDir = "helm/gpushare"

// helmBin is the pinned helm that `make test` builds (hack/tools.sh helm) and passes in
// GPUSHARE_HELM. Without it (a bare `go test ./...`) the chart tests skip and say how to run
// them; `make unit` always sets it.
func helmBin(t *testing.T) string {
	t.Helper()
	h := os.Getenv("GPUSHARE_HELM")
	if h == "" {
		t.Skip("GPUSHARE_HELM unset: run `make unit`, or GPUSHARE_HELM=$(hack/tools.sh helm) go test ./test/manifests/")
	}
	return h
}

// helm runs the helm binary; the error carries its stderr.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// No user configuration, repositories or plugins leak into the tests.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// object is one rendered document: its kind, name, namespace and raw YAML.
type object struct {
	Kind, APIVersion, Name, Namespace string
	raw                               []byte
}

// chart is what `helm template` renders, by "Kind/name".
type chart map[string]object

// render runs `helm template` into namespace ns with the given --set values and extra flags
// (`--kube-version 1.37.2` unless flags name one), failing the test on error.
func render(t *testing.T, ns string, sets []string, flags ...string) chart {
	t.Helper()
	out, err := renderErr(t, ns, sets, flags...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func renderErr(t *testing.T, ns string, sets []string, flags ...string) (chart, error) {
	t.Helper()
	args := []string{"template", "gpushare", chartDir, "--namespace", ns}
	if !containsFlag(flags, "--kube-version") {
		args = append(args, "--kube-version", "1.37.2")
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	args = append(args, flags...)
	out, err := helm(t, args...)
	if err != nil {
		return nil, err
	}
	docs, err := splitDocs([]byte(out))
	if err != nil {
		return nil, err
	}
	c := chart{}
	for _, d := range docs {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(d, &meta); err != nil {
			return nil, fmt.Errorf("rendered document: %w\n%s", err, d)
		}
		if meta.Kind == "" {
			continue
		}
		key := meta.Kind + "/" + meta.Metadata.Name
		if _, dup := c[key]; dup {
			return nil, fmt.Errorf("%s rendered twice", key)
		}
		c[key] = object{meta.Kind, meta.APIVersion, meta.Metadata.Name, meta.Metadata.Namespace, d}
	}
	return c, nil
}

func containsFlag(flags []string, name string) bool {
	for _, f := range flags {
		if f == name || strings.HasPrefix(f, name+"=") {
			return true
		}
	}
	return false
}

func splitDocs(b []byte) ([][]byte, error) {
	docs, err := docsIn("helm template", b)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, d := range docs {
		if len(bytes.TrimSpace(d.raw)) > 0 {
			out = append(out, d.raw)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("helm template rendered nothing")
	}
	return out, nil
}

// decode decodes the object strictly into v (an unknown or misspelt field fails).
func (c chart) decode(t *testing.T, key string, v any) {
	t.Helper()
	o, ok := c[key]
	if !ok {
		t.Fatalf("%s not rendered (have %v)", key, c.keys())
	}
	if err := yaml.UnmarshalStrict(o.raw, v); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
}

func (c chart) keys() []string {
	var ks []string
	for k := range c {
		ks = append(ks, k)
	}
	return ks
}
