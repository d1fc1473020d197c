package routes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// extenderArgs decodes like extenderv1.ExtenderArgs (same keys, matched case-insensitively),
// but reads NodeNames with nodeNameList: a filter call for 5000 nodes is mostly node names,
// and one string allocation per name was the largest cost of the filter handler.
type extenderArgs struct {
	Pod       *corev1.Pod
	Nodes     *corev1.NodeList
	NodeNames *nodeNameList
}

func (a *extenderArgs) toV1() extenderv1.ExtenderArgs {
	return extenderv1.ExtenderArgs{Pod: a.Pod, Nodes: a.Nodes, NodeNames: (*[]string)(a.NodeNames)}
}

// nodeNameList is a JSON array of strings. Names without escapes or non-ASCII bytes (all
// valid node names) are cut from one copy of the array; anything else goes through
// encoding/json, so the result always equals what json.Unmarshal into []string gives.
type nodeNameList []string

func (l *nodeNameList) UnmarshalJSON(b []byte) error {
	if names, ok := plainStrings(b); ok {
		*l = names
		return nil
	}
	return json.Unmarshal(b, (*[]string)(l))
}

// plainStrings parses a valid JSON array whose elements are all plain strings (no escape,
// no byte ≥ 0x80). ok is false for anything else, including null.
func plainStrings(b []byte) ([]string, bool) {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return nil, false
	}
	all := string(b) // one allocation shared by every name
	names := make([]string, 0, bytes.Count(b, []byte{','})+1)
	i := 1
	for {
		i = skipSpace(all, i)
		if i < len(all) && all[i] == ']' && len(names) == 0 {
			return names, true
		}
		if i >= len(all) || all[i] != '"' {
			return nil, false
		}
		start := i + 1
		end := start
		for end < len(all) && all[end] != '"' {
			if c := all[end]; c == '\\' || c >= 0x80 || c < 0x20 {
				return nil, false
			}
			end++
		}
		if end >= len(all) {
			return nil, false
		}
		names = append(names, all[start:end])
		i = skipSpace(all, end+1)
		if i >= len(all) {
			return nil, false
		}
		switch all[i] {
		case ',':
			i++
		case ']':
			return names, skipSpace(all, i+1) == len(all)
		default:
			return nil, false
		}
	}
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

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
	var a extenderArgs
	if err := json.Unmarshal(body, &a); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("decoding request body: %w", err))
		return extenderv1.ExtenderArgs{}, false
	}
	return a.toV1(), true
}
