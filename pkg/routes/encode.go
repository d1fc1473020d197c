package routes

import (
	"net/http"

	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/routes/internal/extenderjson"
)

// writeFilterResult answers 200 with res.
func writeFilterResult(w http.ResponseWriter, res *extenderv1.ExtenderFilterResult) {
	b, err := extenderjson.EncodeFilterResult(res)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeBody(w, b)
}

// writePriorities answers 200 with extenderjson.EncodePriorities(names, scores).
func writePriorities(w http.ResponseWriter, names []string, scores []int64) {
	writeBody(w, extenderjson.EncodePriorities(names, scores))
}

// writeBody answers 200 with b, an encoded JSON document.
func writeBody(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(b); err != nil {
		klog.V(2).InfoS("writing response", "err", err)
	}
}
