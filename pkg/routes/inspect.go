package routes

import (
	"fmt"
	"net/http"

	"github.com/julienschmidt/httprouter"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/cache"
)

// The inspect JSON keeps the old extender's shape ({"nodes":[{"name","totalGPU","usedGPU",
// "devs":[{"id","totalGPU","usedGPU","pods":[{"name","namespace","usedGPU"}]}]}]}) and adds
// fields old readers ignore. All numbers are gpu-mem units.

type inspectResult struct {
	Nodes []inspectNode `json:"nodes"`
}

type inspectNode struct {
	Name     string       `json:"name"`
	TotalGPU int64        `json:"totalGPU"` // healthy cards only
	UsedGPU  int64        `json:"usedGPU"`
	Devs     []inspectDev `json:"devs"`
}

type inspectDev struct {
	ID       int          `json:"id"` // card index
	TotalGPU int64        `json:"totalGPU"`
	UsedGPU  int64        `json:"usedGPU"`
	UUID     string       `json:"uuid,omitempty"`
	Model    string       `json:"model,omitempty"`
	Healthy  bool         `json:"healthy"`
	Pods     []inspectPod `json:"pods"`
}

type inspectPod struct {
	Name      string    `json:"name"`
	Namespace string    `json:"namespace"`
	UID       types.UID `json:"uid"`
	UsedGPU   int64     `json:"usedGPU"`
	Reserved  bool      `json:"reserved"`
}

func (s *server) installInspect(r *httprouter.Router) {
	r.GET(Prefix+"/inspect", s.inspectAll)
	r.GET(Prefix+"/inspect/:node", s.inspectNode)
}

func (s *server) inspectAll(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	out := inspectResult{Nodes: []inspectNode{}}
	for _, n := range s.Cache.Inspect() {
		out.Nodes = append(out.Nodes, toInspectNode(n))
	}
	writeJSON(w, http.StatusOK, &out)
}

func (s *server) inspectNode(w http.ResponseWriter, _ *http.Request, ps httprouter.Params) {
	name := ps.ByName("node")
	n, ok := s.Cache.InspectNode(name)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Errorf("node %q is not a gpushare node", name))
		return
	}
	writeJSON(w, http.StatusOK, &inspectResult{Nodes: []inspectNode{toInspectNode(n)}})
}

func toInspectNode(n cache.NodeInfo) inspectNode {
	out := inspectNode{Name: n.Name, TotalGPU: n.TotalUnits(), UsedGPU: n.UsedUnits(), Devs: make([]inspectDev, 0, len(n.Cards))}
	for _, c := range n.Cards {
		d := inspectDev{ID: c.Index, TotalGPU: c.Total, UsedGPU: c.Used, UUID: c.UUID, Model: c.Model,
			Healthy: c.Healthy, Pods: make([]inspectPod, 0, len(c.Pods))}
		for _, p := range c.Pods {
			d.Pods = append(d.Pods, inspectPod{Name: p.Name, Namespace: p.Namespace, UID: p.UID, UsedGPU: p.Units, Reserved: p.Reserved})
		}
		out.Devs = append(out.Devs, d)
	}
	return out
}
