package routes

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNodeNameListMatchesEncodingJSON: the fast node-name decoder gives exactly what
// encoding/json gives, for plain names and every case it must hand back.
func TestNodeNameListMatchesEncodingJSON(t *testing.T) {
	tests := []struct {
		name, in string
		fast     bool // decoded without falling back
	}{
		{"plain", `["a","node-1","n.example.com"]`, true},
		{"spaces", " [ \"a\" ,\n\t\"b\" ] ", true},
		{"empty", `[]`, true},
		{"empty with space", `[ ]`, true},
		{"empty string", `[""]`, true},
		{"escape", `["a\"b","c\\d","\u00e9"]`, false},
		{"utf8", `["näde"]`, false},
		{"null", `null`, false},
		{"null element", `["a",null]`, false},
		{"number element", `["a",1]`, false},
		{"nested", `[["a"]]`, false},
		{"not an array", `"a"`, false},
		{"object", `{"a":1}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			wantErr := json.Unmarshal([]byte(tc.in), &want)
			var got nodeNameList
			gotErr := json.Unmarshal([]byte(tc.in), &got)
			if (wantErr == nil) != (gotErr == nil) {
				t.Fatalf("error %v, encoding/json says %v", gotErr, wantErr)
			}
			if d := cmp.Diff(want, []string(got)); d != "" {
				t.Errorf("(-encoding/json,+fast):\n%s", d)
			}
			if _, ok := plainStrings([]byte(tc.in)); ok != tc.fast {
				t.Errorf("fast path taken = %v, want %v", ok, tc.fast)
			}
		})
	}
}
