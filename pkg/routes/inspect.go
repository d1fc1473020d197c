package routes

import (
	"fmt"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

func (s *server) installInspect(r *httprouter.Router) {
	r.GET(gpushare.InspectPath, s.limit("inspect", s.whenSynced("inspect", s.inspectAll)))
	r.GET(gpushare.InspectPath+"/:node", s.limit("inspect", s.whenSynced("inspect", s.inspectNode)))
}

func (s *server) inspectAll(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, &gpushare.InspectReport{Nodes: s.Cache.Inspect()})
}

func (s *server) inspectNode(w http.ResponseWriter, _ *http.Request, ps httprouter.Params) {
	name := ps.ByName("node")
	n, ok := s.Cache.InspectNode(name)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Errorf("node %q is not a gpushare node", name))
		return
	}
	writeJSON(w, http.StatusOK, &gpushare.InspectReport{Nodes: []gpushare.InspectNode{n}})
}
