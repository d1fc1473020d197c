package schedulerplugin

import (
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// BenchmarkDRAScoring is one DRA pod's scoring work at 5000 nodes of four 16 GiB cards with
// 20000 claims: reading the view of the 500 nodes kube-scheduler scores (its default share
// at that size) and rating them under fgd.
func BenchmarkDRAScoring(b *testing.B) {
	var sl []*resourceapi.ResourceSlice
	var claims []*resourceapi.ResourceClaim
	want := map[string]bool{}
	for i := range 5000 {
		node := fmt.Sprintf("n%04d", i)
		sl = append(sl, draSlice(b, node, gpushare.GiB, []int64{16, 16, 16, 16}))
		for k := range 4 {
			claims = append(claims, allocated(fmt.Sprintf("c%d-%d", i, k), held{node, fmt.Sprintf("gpu-%d", k), fmt.Sprintf("%dGi", 1+(i+k)%12)}))
		}
		if i%10 == 0 {
			want[node] = true
		}
	}
	req := draRequest{{bytes: 4 << 30, cards: 1}}
	pol, _ := policy.New("fgd")
	var memo sliceMemo
	b.ReportAllocs()
	for b.Loop() {
		d := &draScoring{req: req, view: newDRAView(sl, claims, want, &memo)}
		r := d.rater(pol, policy.Host{}, nil)
		for name := range want {
			r.score(policy.Node{Name: name})
		}
	}
}
