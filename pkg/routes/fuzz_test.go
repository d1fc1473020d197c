package routes_test

import (
	"encoding/json"
	"net/http"
	"testing"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

// FuzzFilter: any body gives 200 with a filter result that accounts for every candidate
// node, or 400 with a JSON error; never a panic or a 500.
func FuzzFilter(f *testing.F) {
	fx := newFixture(f, ct.Node("n1", 16, 16), ct.Placed(ct.Pod("a", 8), "n1", gpushare.CardUnits{0: 8}), ct.BareNode("n2"))
	names := []string{"n1", "n2", "n3"}
	for _, args := range []extenderv1.ExtenderArgs{
		{Pod: ct.Pod("p", 10), NodeNames: &names},
		{Pod: ct.Pod("p", 0), NodeNames: &names},
		{Pod: ct.Pod("p", 17)},
	} {
		b, err := json.Marshal(args)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"Pod":{"spec":{"containers":[{"name":"c","resources":{"limits":{"aliyun.com/gpu-mem":"10","aliyun.com/gpu-count":"3"}}}]}},"NodeNames":["n1"]}`))
	f.Add([]byte(`{"Pod":{"spec":{"initContainers":[{"name":"i","restartPolicy":"Always","resources":{"limits":{"aliyun.com/gpu-mem":"4"}}}],"containers":[{"name":"c","resources":{"limits":{"aliyun.com/gpu-mem":"-3"}}}]}},"Nodes":{"items":[{"metadata":{"name":"n1"}}]}}`))
	f.Add([]byte(`{"Pod":{},"NodeNames":["n1",null,"\u00e9"]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, verb := range []string{"filter", "prioritize"} {
			rec := fx.do(t, http.MethodPost, "/gpushare-scheduler/"+verb, body)
			switch rec.Code {
			case http.StatusBadRequest:
				var e struct{ Error string }
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
					t.Fatalf("%s 400 without a JSON error: %q", verb, rec.Body)
				}
			case http.StatusOK:
				var args extenderv1.ExtenderArgs
				if err := json.Unmarshal(body, &args); err != nil {
					t.Fatalf("%s accepted what encoding/json rejects (%v): %q", verb, err, body)
				}
				n := 0
				if args.NodeNames != nil {
					n = len(*args.NodeNames)
				} else if args.Nodes != nil {
					n = len(args.Nodes.Items)
				}
				if verb == "prioritize" {
					// Only nodes scored 1..10, each a node asked about, in the order asked;
					// or, when none scores above 0, every node with 0.
					var got extenderv1.HostPriorityList
					if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || len(got) > n {
						t.Fatalf("prioritize: %d scores for %d nodes (%v)", len(got), n, err)
					}
					names := requestNames(&args)
					if len(got) == n && n > 0 && got[0].Score == 0 {
						for i, h := range got {
							if h.Host != names[i] || h.Score != 0 {
								t.Fatalf("prioritize: all-zero answer %v for %v", got, names)
							}
						}
						continue
					}
					j := 0
					for _, h := range got {
						if h.Score < 1 || h.Score > extenderv1.MaxExtenderPriority {
							t.Fatalf("score %d out of range 1..10", h.Score)
						}
						for j < len(names) && names[j] != h.Host {
							j++
						}
						if j == len(names) {
							t.Fatalf("prioritize: host %q not asked about, or out of order", h.Host)
						}
						j++
					}
					continue
				}
				var got extenderv1.ExtenderFilterResult
				if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
					t.Fatalf("filter answer is not JSON: %v", err)
				}
				pass := 0
				if got.NodeNames != nil {
					pass = len(*got.NodeNames)
				} else if got.Nodes != nil {
					pass = len(got.Nodes.Items)
				}
				// duplicate names collapse in the failure maps, so only bound the count
				if failed := len(got.FailedNodes) + len(got.FailedAndUnresolvableNodes); pass+failed > n || (failed == 0 && pass != n) {
					t.Fatalf("filter: %d pass + %d failed for %d nodes", pass, failed, n)
				}
			default:
				t.Fatalf("%s status %d: %s", verb, rec.Code, rec.Body)
			}
		}
	})
}

// FuzzBind: any body gives 200 with an ExtenderBindingResult or 400 with a JSON error.
func FuzzBind(f *testing.F) {
	fx := newFixture(f, ct.Node("n1", 16, 16), ct.Pod("p", 6), ct.Pod("q", 0), ct.Pod("r", 40))
	for _, args := range []extenderv1.ExtenderBindingArgs{
		{PodName: "p", PodNamespace: "default", PodUID: "uid-p", Node: "n1"},
		{PodName: "q", PodNamespace: "default", Node: "n1"},
		{PodName: "r", PodNamespace: "default", PodUID: "uid-r", Node: "n1"},
		{PodName: "p", PodNamespace: "default", PodUID: "x", Node: "n2"},
	} {
		b, err := json.Marshal(args)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"PodName":"p","PodNamespace":"default","Node":"n1"`))
	f.Add([]byte(`{"PodName":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := fx.do(t, http.MethodPost, "/gpushare-scheduler/bind", body)
		switch rec.Code {
		case http.StatusOK:
			var res extenderv1.ExtenderBindingResult
			if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
				t.Fatalf("bind answer is not JSON: %q", rec.Body)
			}
		case http.StatusBadRequest:
			var e struct{ Error string }
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
				t.Fatalf("400 without a JSON error: %q", rec.Body)
			}
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		n, _ := fx.Cache.InspectNode("n1")
		for _, c := range n.Cards {
			if c.Used > c.Total {
				t.Fatalf("card %d over-committed: %d/%d", c.Index, c.Used, c.Total)
			}
		}
	})
}

// requestNames lists the node names of a filter or prioritize request, from NodeNames or Nodes.
func requestNames(args *extenderv1.ExtenderArgs) []string {
	if args.NodeNames != nil {
		return *args.NodeNames
	}
	var names []string
	if args.Nodes != nil {
		for i := range args.Nodes.Items {
			names = append(names, args.Nodes.Items[i].Name)
		}
	}
	return names
}
