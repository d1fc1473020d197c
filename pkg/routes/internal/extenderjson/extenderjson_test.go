package extenderjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
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
			if d := cmp.Diff(want, got.names); d != "" {
				t.Errorf("(-encoding/json,+fast):\n%s", d)
			}
			if _, ok, _ := plainStrings([]byte(tc.in), 0); ok != tc.fast {
				t.Errorf("fast path taken = %v, want %v", ok, tc.fast)
			}
		})
	}
}

// TestEncodeFilterResultMatchesEncodingJSON: the hand-written encoder produces the same
// bytes as encoding/json.
func TestEncodeFilterResultMatchesEncodingJSON(t *testing.T) {
	names := []string{"a", "n-1", `we"ird`, "<tag>", "näde", "tab\there"}
	empty := []string{}
	tests := []struct {
		name string
		res  extenderv1.ExtenderFilterResult
	}{
		{"zero", extenderv1.ExtenderFilterResult{}},
		{"names", extenderv1.ExtenderFilterResult{NodeNames: &names,
			FailedNodes:                extenderv1.FailedNodesMap{"z": `container "a": need 3`, "b": "need 10 on one card; largest free 8 (card0 8/16)"},
			FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{}, Error: "x\ny"}},
		{"empty names", extenderv1.ExtenderFilterResult{NodeNames: &empty}},
		{"nodes", extenderv1.ExtenderFilterResult{Nodes: &corev1.NodeList{Items: []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n"}}}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var want bytes.Buffer
			if err := json.NewEncoder(&want).Encode(&tc.res); err != nil {
				t.Fatal(err)
			}
			got, err := EncodeFilterResult(&tc.res)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want.String(), string(got)); d != "" {
				t.Errorf("(-encoding/json,+ours):\n%s", d)
			}
		})
	}
}

// TestEncodePrioritiesMatchesEncodingJSON: the hand-written encoder produces the bytes
// encoding/json gives for the HostPriorityList of the nodes scored above 0, in the order of
// the names, or of every node when none scores above 0.
func TestEncodePrioritiesMatchesEncodingJSON(t *testing.T) {
	names := []string{"a", "n-1", `we"ird`, "<tag>", "näde", "tab\there"}
	tests := []struct {
		name   string
		scores []int64
		want   extenderv1.HostPriorityList
	}{
		{"nil scores", nil, extenderv1.HostPriorityList{
			{Host: "a"}, {Host: "n-1"}, {Host: `we"ird`}, {Host: "<tag>"}, {Host: "näde"}, {Host: "tab\there"}}},
		{"all zero", make([]int64, len(names)), extenderv1.HostPriorityList{
			{Host: "a"}, {Host: "n-1"}, {Host: `we"ird`}, {Host: "<tag>"}, {Host: "näde"}, {Host: "tab\there"}}},
		{"some", []int64{10, 0, 3, 0, 1, 9}, extenderv1.HostPriorityList{
			{Host: "a", Score: 10}, {Host: `we"ird`, Score: 3}, {Host: "näde", Score: 1}, {Host: "tab\there", Score: 9}}},
		{"all", []int64{1, 2, 3, 4, 5, 10}, extenderv1.HostPriorityList{
			{Host: "a", Score: 1}, {Host: "n-1", Score: 2}, {Host: `we"ird`, Score: 3},
			{Host: "<tag>", Score: 4}, {Host: "näde", Score: 5}, {Host: "tab\there", Score: 10}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var want bytes.Buffer
			if err := json.NewEncoder(&want).Encode(tc.want); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want.String(), string(EncodePriorities(names, tc.scores))); d != "" {
				t.Errorf("(-encoding/json,+ours):\n%s", d)
			}
		})
	}
}

// TestDecodeArgsLimitsNames: more NodeNames than the limit is a *TooManyNamesError on both
// paths, and a hostile array of empty names is refused without a slice for all of them.
func TestDecodeArgsLimitsNames(t *testing.T) {
	hostile := append([]byte(`{"NodeNames":[`), bytes.Repeat([]byte(`"",`), 1<<20)...)
	hostile = append(hostile, `""]}`...)
	tests := []struct {
		name     string
		body     string
		max      int
		wantErr  bool // a *TooManyNamesError
		maxBytes uint64
	}{
		{name: "at the limit", body: `{"NodeNames":["a","b","c"]}`, max: 3},
		{name: "over the limit", body: `{"NodeNames":["a","b","c"]}`, max: 2, wantErr: true},
		{name: "no limit", body: `{"NodeNames":["a","b","c"]}`, max: 0},
		{name: "escaped names: encoding/json path", body: `{"NodeNames":["\u0061","b","c"]}`, max: 2, wantErr: true},
		{name: "repeated key: encoding/json path", body: `{"NodeNames":null,"NodeNames":["a","b","c"]}`, max: 2, wantErr: true},
		{name: "nodes are not counted", body: `{"Nodes":{"items":[{},{},{}]}}`, max: 2},
		// 1M+1 empty names in 3 MiB: without the limit the slice alone is 16 MiB; with it the
		// body's one string copy (3 MiB) and 20,000 slots (320 KB).
		{name: "hostile empty names", body: string(hostile), max: 20000, wantErr: true, maxBytes: 4 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			got, err := DecodeArgs(body, tc.max)
			runtime.ReadMemStats(&after)
			var tooMany *TooManyNamesError
			if gotErr := errors.As(err, &tooMany); gotErr != tc.wantErr || (err != nil && !gotErr) {
				t.Fatalf("error %v, want TooManyNamesError: %v", err, tc.wantErr)
			}
			if tc.wantErr && tooMany.Max != tc.max {
				t.Errorf("error names limit %d, want %d", tooMany.Max, tc.max)
			}
			if !tc.wantErr && tc.max > 0 && got.NodeNames != nil && len(*got.NodeNames) > tc.max {
				t.Errorf("%d names decoded, limit %d", len(*got.NodeNames), tc.max)
			}
			if n := after.TotalAlloc - before.TotalAlloc; tc.maxBytes > 0 && n > tc.maxBytes {
				t.Errorf("decoding allocated %d bytes, want at most %d", n, tc.maxBytes)
			}
		})
	}
}
