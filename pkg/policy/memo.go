package policy

import "math"

// scoreMemo remembers a Scorer's answers by node content. Scorer.Score is a pure function of
// the node's cards (index, size, use, health) and free host for one pod and policy, and the
// nodes of a cluster repeat: empty nodes of one type, full ones, nodes running the same pods.
// A node equal in every card and in its host to one scored before gets that node's score and
// fit, bit for bit. Entries are found by a hash and confirmed by comparing the content, so
// a collision costs a miss, never a wrong answer. Owned by one Scorer (one prioritize call
// or one piece of one), so it holds at most one entry per node scored; reset empties it for
// the Scorer's next pod (ScorerPool) and keeps its storage.
type scoreMemo struct {
	index   map[uint64]int32 // hash → first entry with that hash
	entries []memoEntry
	// chunks are the arrays the entries' cards are copied into, chunks[:used] handed out
	// since the last reset, free the unused end of chunks[used-1]. Chunks are never grown
	// and copied, only added (doubling up to maxMemoChunk cards): a prioritize call
	// allocates about what it keeps, and a reset memo nothing until it outgrows them.
	chunks [][]Card
	used   int
	free   []Card
}

type memoEntry struct {
	next int32 // next entry with the same hash, -1 at the end
	// nUnmet and unmet are the node's Unmet set by identity (its length and first word's
	// address): nodes share sets, so an equal set in another array only costs a miss.
	// Packed with next, they keep an entry at 72 bytes.
	nUnmet  int32
	cards   []Card // a copy of the node's cards
	unmet   *uint64
	host    Host
	score   float64
	hasHost bool
	ok      bool
}

// A memo holds at most maxMemoEntries nodes, of at most maxMemoCards cards each; other
// nodes are scored and not remembered.
const (
	maxMemoEntries = 1 << 14
	maxMemoCards   = 64
	minMemoChunk   = 64
	maxMemoChunk   = 1024
)

// nodeHash mixes what most often tells nodes apart, the cards' use and the free host; the
// comparison in lookup covers the rest. Deterministic and allocation-free.
func nodeHash(node Node) uint64 {
	const prime = 0x100000001b3
	h := uint64(len(node.Cards))
	for _, c := range node.Cards {
		h = (h + uint64(c.Used)) * prime
	}
	if node.Host != nil {
		h = (h + uint64(node.Host.CPUMilli)) * prime
		h = (h + uint64(node.Host.MemoryMiB)) * prime
	}
	return h
}

// lookup returns the remembered answer for node, and the hash to store a new one under.
func (m *scoreMemo) lookup(node Node) (score float64, ok, found bool, h uint64) {
	h = nodeHash(node)
	i, in := m.index[h]
	if !in {
		return 0, false, false, h
	}
	for ; i >= 0; i = m.entries[i].next {
		if e := &m.entries[i]; m.same(e, node) {
			return e.score, e.ok, true, h
		}
	}
	return 0, false, false, h
}

func (m *scoreMemo) same(e *memoEntry, node Node) bool {
	if len(e.cards) != len(node.Cards) || e.hasHost != (node.Host != nil) || (e.hasHost && e.host != *node.Host) ||
		int(e.nUnmet) != len(node.Unmet) || e.unmet != firstWord(node.Unmet) {
		return false
	}
	for k, c := range e.cards {
		if c != node.Cards[k] {
			return false
		}
	}
	return true
}

// store remembers node's answer under h (from lookup), unless the memo is full.
func (m *scoreMemo) store(h uint64, node Node, score float64, ok bool) {
	if len(m.entries) >= maxMemoEntries || len(node.Cards) > maxMemoCards {
		return
	}
	if m.index == nil {
		m.index = make(map[uint64]int32)
	}
	n := len(node.Cards)
	if len(m.free) < n {
		m.free = m.nextChunk(n)
	}
	if len(node.Unmet) > math.MaxInt32 {
		return
	}
	e := memoEntry{next: -1, cards: m.free[:n:n], nUnmet: int32(len(node.Unmet)), unmet: firstWord(node.Unmet), score: score, ok: ok}
	copy(e.cards, node.Cards)
	m.free = m.free[n:]
	if node.Host != nil {
		e.hasHost, e.host = true, *node.Host
	}
	if first, in := m.index[h]; in {
		e.next = first
	}
	m.index[h] = int32(len(m.entries))
	m.entries = append(m.entries, e)
}

// firstWord is the address of s's first word, nil for an empty set.
func firstWord(s ConstraintSet) *uint64 {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

// nextChunk is the next chunk of at least n cards: one kept from before the last reset, or
// a new one twice the size of the last (minMemoChunk..maxMemoChunk).
func (m *scoreMemo) nextChunk(n int) []Card {
	for m.used < len(m.chunks) {
		c := m.chunks[m.used]
		m.used++
		if len(c) >= n {
			return c
		}
	}
	size := minMemoChunk
	if k := len(m.chunks); k > 0 {
		size = min(2*len(m.chunks[k-1]), maxMemoChunk)
	}
	c := make([]Card, max(size, n))
	m.chunks = append(m.chunks, c)
	m.used = len(m.chunks)
	return c
}

// reset forgets every entry and keeps the storage: the index's table, the entries' array
// and the chunks. The entries are zeroed so that they keep no node's constraint set alive.
func (m *scoreMemo) reset() {
	clear(m.index)
	clear(m.entries)
	m.entries = m.entries[:0]
	m.used, m.free = 0, nil
}
