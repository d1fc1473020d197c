package extenderjson

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// FuzzDecodeArgs: the fast ExtenderArgs decoder agrees with encoding/json on every input:
// both fail, or both give the same arguments. With a limit of 2 names it gives the same
// arguments when it succeeds, never more than 2 names, and fails only where encoding/json
// does or with a *TooManyNamesError.
func FuzzDecodeArgs(f *testing.F) {
	for _, s := range []string{
		`{"Pod":{"metadata":{"name":"p"}},"Nodes":null,"NodeNames":["a","b"]}`,
		`{"NodeNames":["a"],"Pod":{}}`,
		`{"nodenames":["a"] , "pod":{"spec":{"nodeName":"x"}}}`,
		`{"NodeNames":["a"],"NodeNames":["b"]}`,
		`{"NodeNames":["a\"b"]}`,
		`{"NodeNames":null}`,
		`{"NodeNames":null,"NodeNames":["b"]}`,
		`{"NodeNames":["a"],"nodeNames":null}`,
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
		got, gotErr := DecodeArgs(b, 0)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("input %q: error %v, encoding/json says %v", b, gotErr, wantErr)
		}
		if wantErr == nil {
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("input %q (-encoding/json,+fast):\n%s", b, d)
			}
		}
		lim, limErr := DecodeArgs(b, 2)
		var tooMany *TooManyNamesError
		switch {
		case limErr != nil:
			if wantErr == nil && !errors.As(limErr, &tooMany) {
				t.Fatalf("input %q, limit 2: error %v, encoding/json says none", b, limErr)
			}
		case wantErr != nil:
			t.Fatalf("input %q, limit 2: no error, encoding/json says %v", b, wantErr)
		case lim.NodeNames != nil && len(*lim.NodeNames) > 2:
			t.Fatalf("input %q, limit 2: %d names", b, len(*lim.NodeNames))
		default:
			if d := cmp.Diff(want, lim); d != "" {
				t.Fatalf("input %q, limit 2 (-encoding/json,+fast):\n%s", b, d)
			}
		}
	})
}
