package extenderjson

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// FuzzDecodeArgs: the fast ExtenderArgs decoder agrees with encoding/json on every input:
// both fail, or both give the same arguments.
func FuzzDecodeArgs(f *testing.F) {
	for _, s := range []string{
		`{"Pod":{"metadata":{"name":"p"}},"Nodes":null,"NodeNames":["a","b"]}`,
		`{"NodeNames":["a"],"Pod":{}}`,
		`{"nodenames":["a"] , "pod":{"spec":{"nodeName":"x"}}}`,
		`{"NodeNames":["a"],"NodeNames":["b"]}`,
		`{"NodeNames":["a\"b"]}`,
		`{"NodeNames":null}`,
		`{"Pod":{"metadata":{"annotations":{"NodeNames":"[\"x\"]"}}},"NodeNames":[]}`,
		`{"NodeNames":["a"]} x`,
		`{"NodeNames":["a"],}`,
		`{"Nodes":{"items":[{"metadata":{"name":"n"}}]}}`,
		`[]`, `null`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want extenderv1.ExtenderArgs
		wantErr := json.Unmarshal(b, &want)
		got, gotErr := DecodeArgs(b)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("input %q: error %v, encoding/json says %v", b, gotErr, wantErr)
		}
		if wantErr == nil {
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("input %q (-encoding/json,+fast):\n%s", b, d)
			}
		}
	})
}
