package gpushare

import (
	"strings"
	"testing"
)

func TestCheckRecordUnit(t *testing.T) {
	mib := Unit{MiB: 1}
	for _, tc := range []struct {
		name    string
		ann     map[string]string
		node    Unit
		wantErr string // "" means nil
	}{
		{name: "no unit annotation counts in the node's unit", ann: nil, node: mib},
		{name: "same unit", ann: map[string]string{AnnotationUnit: "GiB"}, node: GiB},
		{name: "same unit, other spelling", ann: map[string]string{AnnotationUnit: "1024MiB"}, node: GiB},
		{name: "GiB record on a MiB node", ann: map[string]string{AnnotationUnit: "GiB"}, node: mib, wantErr: "counts in GiB"},
		{name: "MiB record on a GiB node", ann: map[string]string{AnnotationUnit: "MiB"}, node: GiB, wantErr: "the node counts in GiB"},
		{name: "unreadable unit", ann: map[string]string{AnnotationUnit: "bytes"}, node: GiB, wantErr: AnnotationUnit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckRecordUnit(pod(tc.ann, nil), tc.node)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("CheckRecordUnit = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("CheckRecordUnit = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
