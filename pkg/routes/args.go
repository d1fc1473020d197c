package routes

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/routes/internal/extenderjson"
)

// readBody reads the whole body, at most MaxRequestBytes; on failure it answers 400 and
// returns false.
func (s *server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n <= s.MaxRequestBytes {
		buf.Grow(int(n) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, s.MaxRequestBytes)); err != nil {
		writeError(w, http.StatusBadRequest, bodyError(err))
		return nil, false
	}
	return buf.Bytes(), true
}

func bodyError(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return fmt.Errorf("request body exceeds %d bytes", tooBig.Limit)
	}
	return fmt.Errorf("decoding request body: %w", err)
}

// decodeArgs reads ExtenderArgs for filter and prioritize; on failure it answers 400.
func (s *server) decodeArgs(w http.ResponseWriter, r *http.Request) (extenderv1.ExtenderArgs, bool) {
	body, ok := s.readBody(w, r)
	if !ok {
		return extenderv1.ExtenderArgs{}, false
	}
	args, err := extenderjson.DecodeArgs(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("decoding request body: %w", err))
		return extenderv1.ExtenderArgs{}, false
	}
	return args, true
}
