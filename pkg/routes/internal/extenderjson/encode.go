package extenderjson

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// EncodeFilterResult writes res as encoding/json would (same keys, map keys sorted), but
// appends plain strings directly: a filter answer for 5000 nodes is mostly node names and
// repeated reasons, and reflection-driven encoding was a third of the handler's time.
func EncodeFilterResult(res *extenderv1.ExtenderFilterResult) ([]byte, error) {
	size := 128
	if res.NodeNames != nil {
		size += 16 * len(*res.NodeNames)
	}
	size += 96 * (len(res.FailedNodes) + len(res.FailedAndUnresolvableNodes))
	b := make([]byte, 0, size)
	b = append(b, `{"Nodes":`...)
	if res.Nodes == nil {
		b = append(b, "null"...)
	} else {
		nodes, err := json.Marshal(res.Nodes)
		if err != nil {
			return nil, err
		}
		b = append(b, nodes...)
	}
	b = append(b, `,"NodeNames":`...)
	if res.NodeNames == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, n := range *res.NodeNames {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, n)
		}
		b = append(b, ']')
	}
	b = append(b, `,"FailedNodes":`...)
	b = appendMap(b, res.FailedNodes)
	b = append(b, `,"FailedAndUnresolvableNodes":`...)
	b = appendMap(b, res.FailedAndUnresolvableNodes)
	b = append(b, `,"Error":`...)
	b = appendString(b, res.Error)
	return append(b, '}', '\n'), nil
}

func appendMap(b []byte, m extenderv1.FailedNodesMap) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendString(b, m[k])
	}
	return append(b, '}')
}

// appendString appends s as a JSON string; anything but printable ASCII without quotes,
// backslashes or HTML characters goes through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// EncodePriorities writes an extenderv1.HostPriorityList as encoding/json would
// ([{"Host":…,"Score":…},…] and a newline), in the order of names; scores[i] is the score of
// names[i], nil scores every node 0. When some node scores above 0 the list holds only those
// nodes; when none does, it holds every node with 0 (see prioritize for why).
func EncodePriorities(names []string, scores []int64) []byte {
	n := 0
	for _, v := range scores {
		if v > 0 {
			n++
		}
	}
	all := n == 0
	if all {
		n = len(names)
	}
	b := make([]byte, 0, 4+n*(len(`{"Host":"","Score":10},`)+24))
	b = append(b, '[')
	first := true
	for i, name := range names {
		var v int64
		if scores != nil {
			v = scores[i]
		}
		if v <= 0 && !all {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, `{"Host":`...)
		b = appendString(b, name)
		b = append(b, `,"Score":`...)
		b = strconv.AppendInt(b, v, 10)
		b = append(b, '}')
	}
	return append(b, ']', '\n')
}
