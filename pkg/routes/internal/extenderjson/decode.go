package extenderjson

import (
	"bytes"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// DecodeArgs decodes body as json.Unmarshal into extenderv1.ExtenderArgs would,
// faster for the usual filter call: when the top-level "NodeNames" is an array of plain
// strings it is cut out and parsed by plainStrings, and encoding/json only sees the rest
// (the pod) with null in its place. Anything unusual takes the encoding/json path.
// FuzzDecodeArgs holds both paths to the same results.
func DecodeArgs(body []byte) (extenderv1.ExtenderArgs, error) {
	if vs, ve, ok := findNodeNames(body); ok {
		if names, ok := plainStrings(body[vs:ve]); ok {
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
	var a extenderArgs
	if err := json.Unmarshal(body, &a); err != nil {
		return extenderv1.ExtenderArgs{}, err
	}
	return a.toV1(), nil
}

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
