package extenderjson

import (
	"bytes"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// TooManyNamesError: the top-level "NodeNames" array has more than Max elements.
type TooManyNamesError struct {
	Max int
}

func (e *TooManyNamesError) Error() string {
	return fmt.Sprintf("NodeNames lists more than %d nodes", e.Max)
}

// DecodeArgs decodes body as json.Unmarshal into extenderv1.ExtenderArgs would,
// faster for the usual filter call: when the top-level "NodeNames" is an array of plain
// strings it is cut out and parsed by plainStrings, and encoding/json only sees the rest
// (the pod) with null in its place. Anything unusual takes the encoding/json path.
// FuzzDecodeArgs holds both paths to the same results.
//
// A NodeNames array of more than maxNames elements (maxNames > 0) is a *TooManyNamesError,
// found before the names are kept: a body of short names ("",) would otherwise cost 16 bytes
// of slice per 3 bytes of body. Nodes (full objects) are not counted here.
func DecodeArgs(body []byte, maxNames int) (extenderv1.ExtenderArgs, error) {
	if vs, ve, ok := findNodeNames(body); ok {
		names, ok, err := plainStrings(body[vs:ve], maxNames)
		if err != nil {
			return extenderv1.ExtenderArgs{}, err
		}
		if ok {
			rest := make([]byte, 0, len(body)-(ve-vs)+4)
			rest = append(append(append(rest, body[:vs]...), "null"...), body[ve:]...)
			var a extenderv1.ExtenderArgs
			if err := json.Unmarshal(rest, &a); err != nil {
				return extenderv1.ExtenderArgs{}, err
			}
			a.NodeNames = &names
			return a, nil
		}
	}
	a := extenderArgs{NodeNames: nodeNameList{max: maxNames}}
	if err := json.Unmarshal(body, &a); err != nil {
		return extenderv1.ExtenderArgs{}, err
	}
	return a.toV1(), nil
}

// extenderArgs decodes like extenderv1.ExtenderArgs (same keys, matched case-insensitively),
// but reads NodeNames with nodeNameList: a filter call for 5000 nodes is mostly node names,
// and one string allocation per name was the largest cost of the filter handler.
// NodeNames is a value, not a pointer, so that the limit DecodeArgs sets survives every
// occurrence of the key (encoding/json would replace a pointer set to nil by a null).
type extenderArgs struct {
	Pod       *corev1.Pod
	Nodes     *corev1.NodeList
	NodeNames nodeNameList
}

func (a *extenderArgs) toV1() extenderv1.ExtenderArgs {
	out := extenderv1.ExtenderArgs{Pod: a.Pod, Nodes: a.Nodes}
	if a.NodeNames.set {
		out.NodeNames = &a.NodeNames.names
	}
	return out
}

// nodeNameList is a JSON array of strings, at most max of them when max > 0 (more is a
// *TooManyNamesError). Names without escapes or non-ASCII bytes (all valid node names) are
// cut from one copy of the array; anything else goes through encoding/json, so the result
// always equals what json.Unmarshal into []string gives.
type nodeNameList struct {
	names []string
	max   int
	set   bool // the last value decoded was an array: NodeNames is not nil
}

// UnmarshalJSON decodes an array into l, or null, which leaves NodeNames nil (encoding/json
// calls it for null too: l is a struct field, not a pointer).
func (l *nodeNameList) UnmarshalJSON(b []byte) error {
	l.names, l.set = nil, false
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	names, ok, err := plainStrings(b, l.max)
	switch {
	case err != nil:
		return err
	case ok:
		l.names, l.set = names, true
		return nil
	}
	if err := json.Unmarshal(b, &l.names); err != nil {
		return err
	}
	if l.max > 0 && len(l.names) > l.max {
		l.names = nil
		return &TooManyNamesError{Max: l.max}
	}
	l.set = true
	return nil
}

// plainStrings parses a valid JSON array whose elements are all plain strings (no escape,
// no byte ≥ 0x80). ok is false for anything else, including null. With max > 0, an array
// reaching a (max+1)th string is a *TooManyNamesError, whatever follows.
func plainStrings(b []byte, max int) (names []string, ok bool, err error) {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return nil, false, nil
	}
	all := string(b) // one allocation shared by every name
	// Commas bound the element count (names may hold commas too); the limit bounds the
	// capacity, so that a hostile array of empty names allocates no more than max.
	size := bytes.Count(b, []byte{','}) + 1
	if max > 0 && size > max {
		size = max
	}
	names = make([]string, 0, size)
	i := 1
	for {
		i = skipSpace(all, i)
		if i < len(all) && all[i] == ']' && len(names) == 0 {
			return names, true, nil
		}
		if i >= len(all) || all[i] != '"' {
			return nil, false, nil
		}
		if max > 0 && len(names) == max {
			return nil, false, &TooManyNamesError{Max: max}
		}
		start := i + 1
		end := start
		for end < len(all) && all[end] != '"' {
			if c := all[end]; c == '\\' || c >= 0x80 || c < 0x20 {
				return nil, false, nil
			}
			end++
		}
		if end >= len(all) {
			return nil, false, nil
		}
		names = append(names, all[start:end])
		i = skipSpace(all, end+1)
		if i >= len(all) {
			return nil, false, nil
		}
		switch all[i] {
		case ',':
			i++
		case ']':
			return names, skipSpace(all, i+1) == len(all), nil
		default:
			return nil, false, nil
		}
	}
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// findNodeNames locates the value of the one top-level key equal to "NodeNames" (ASCII
// case-insensitive, as encoding/json matches it). It does not validate: encoding/json still
// checks everything outside the returned range, and plainStrings what is inside. ok is
// false for anything it does not understand (escaped or non-ASCII keys, a repeated key).
func findNodeNames(b []byte) (vs, ve int, ok bool) {
	i := skipSpaceB(b, 0)
	if i >= len(b) || b[i] != '{' {
		return 0, 0, false
	}
	found := false
	i = skipSpaceB(b, i+1)
	if i < len(b) && b[i] == '}' {
		return 0, 0, false
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, 0, false
		}
		ks := i + 1
		ke := ks
		for ke < len(b) && b[ke] != '"' {
			if b[ke] == '\\' || b[ke] >= 0x80 {
				return 0, 0, false
			}
			ke++
		}
		if ke >= len(b) {
			return 0, 0, false
		}
		i = skipSpaceB(b, ke+1)
		if i >= len(b) || b[i] != ':' {
			return 0, 0, false
		}
		i = skipSpaceB(b, i+1)
		end := skipValue(b, i)
		if end < 0 {
			return 0, 0, false
		}
		if bytes.EqualFold(b[ks:ke], []byte("NodeNames")) {
			if found {
				return 0, 0, false
			}
			found, vs, ve = true, i, end
		}
		i = skipSpaceB(b, end)
		if i >= len(b) {
			return 0, 0, false
		}
		switch b[i] {
		case ',':
			i = skipSpaceB(b, i+1)
		case '}':
			return vs, ve, found && skipSpaceB(b, i+1) == len(b)
		default:
			return 0, 0, false
		}
	}
}

// skipValue returns the end of the JSON value starting at b[i] (not validated), or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				if i = skipString(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default: // number, true, false, null
		start := i
		for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
			i++
		}
		if i == start {
			return -1
		}
		return i
	}
}

// skipString returns the end of the JSON string starting at b[i] == '"', or -1.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

func skipSpaceB(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
