package replay

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTable(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	ss := []Summary{
		{Mode: "offline", Policy: "fgd", Trace: "default", UnallocatedAt100: f(4), PodsPerSec: 100},
		{Mode: "offline", Policy: "fgd", Trace: "default", UnallocatedAt100: f(6), PodsPerSec: 300},
		{Mode: "offline", Policy: "fgd", Trace: "gpushare40", UnallocatedAt100: f(3), PodsPerSec: 200},
		{Mode: "offline", Policy: "binpack", Trace: "gpushare40", PodsPerSec: 50}, // never reached 100 %
		{Mode: "cluster", Policy: "binpack", Trace: "default", UnallocatedAt100: f(15.3), PodsPerSec: 21.9},
	}
	var b bytes.Buffer
	if err := Aggregate(ss).WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	// fgd default: mean 5, sd sqrt(2) = 1.41; pods/s: mean over traces of (200, 200).
	want := "Mode `cluster`: unallocated GPU % at 100 % arrived workload, mean ± sd (runs)\n\n" +
		"| policy | default | pods/s | paper, default |\n|---|---|---|---|\n" +
		"| binpack | 15.30 (1) | 21.9 | – |\n\n" +
		"Mode `offline`: unallocated GPU % at 100 % arrived workload, mean ± sd (runs)\n\n" +
		"| policy | default | gpushare40 | pods/s | paper, default |\n|---|---|---|---|---|\n" +
		"| binpack | – | n/a | 50.0 | – |\n" +
		"| fgd | 5.00 ± 1.41 (2) | 3.00 (1) | 200.0 | 4.77 |\n\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("markdown (-want,+got):\n%s", diff)
	}
}
