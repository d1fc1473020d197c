package manifests_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// doc is one YAML document of a manifest file, with its kind.
type doc struct {
	kind string
	raw  []byte
}

// docsOf splits a manifest file into its YAML documents. Errors: the file cannot be read, or
// a document is not YAML with a kind field readable.
func docsOf(file string) ([]doc, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return docsIn(file, raw)
}

// docsIn is docsOf of raw, named name in errors.
func docsIn(file string, raw []byte) ([]doc, error) {
	var out []doc
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for i := 0; ; i++ {
		b, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s#%d: %w", file, i, err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(b, &tm); err != nil {
			return nil, fmt.Errorf("%s#%d: %w", file, i, err)
		}
		out = append(out, doc{kind: tm.Kind, raw: b})
	}
}
