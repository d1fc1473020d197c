package routes

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/routes/internal/extenderjson"
)

// body returns the request body capped at MaxRequestBytes. A body whose Content-Length
// already exceeds the cap is answered 400 at once, unread (false): a client announcing
// 64 MiB and sending it slowly holds nothing but its connection.
func (s *server) body(w http.ResponseWriter, r *http.Request) (io.Reader, bool) {
	if r.ContentLength > s.MaxRequestBytes {
		writeError(w, http.StatusBadRequest, fmt.Errorf("request body exceeds %d bytes", s.MaxRequestBytes))
		return nil, false
	}
	return http.MaxBytesReader(w, r.Body, s.MaxRequestBytes), true
}

// readBody reads the whole body, at most MaxRequestBytes; on failure it answers 400 and
// returns false. The buffer grows with the bytes that arrive, never from Content-Length,
// which is only the client's claim.
func (s *server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, ok := s.body(w, r)
	if !ok {
		return nil, false
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(body); err != nil {
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

// decodeArgs reads ExtenderArgs for filter and prioritize; on failure, or when NodeNames or
// Nodes list more than MaxNodesPerRequest nodes, it answers 400.
func (s *server) decodeArgs(w http.ResponseWriter, r *http.Request) (extenderv1.ExtenderArgs, bool) {
	body, ok := s.readBody(w, r)
	if !ok {
		return extenderv1.ExtenderArgs{}, false
	}
	args, err := extenderjson.DecodeArgs(body, s.MaxNodesPerRequest)
	var tooMany *extenderjson.TooManyNamesError
	switch {
	case errors.As(err, &tooMany), err == nil && args.Nodes != nil && len(args.Nodes.Items) > s.MaxNodesPerRequest:
		writeError(w, http.StatusBadRequest, s.tooManyNodes())
		return extenderv1.ExtenderArgs{}, false
	case err != nil:
		writeError(w, http.StatusBadRequest, fmt.Errorf("decoding request body: %w", err))
		return extenderv1.ExtenderArgs{}, false
	}
	return args, true
}

func (s *server) tooManyNodes() error {
	return fmt.Errorf("request lists more than %d nodes, the most one call may name", s.MaxNodesPerRequest)
}
