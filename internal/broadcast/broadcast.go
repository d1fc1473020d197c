// Package broadcast wakes every waiter on each change: the signal share-plugin's card health
// and device-plugin registrations use to tell their watchers that something changed.
package broadcast

import "sync"

// Signal's Wait returns a channel that is closed at the next Notify. The zero value is not
// ready: use New.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// New returns a Signal with no change pending.
func New() *Signal { return &Signal{ch: make(chan struct{})} }

// Wait returns a channel closed by the next Notify.
func (s *Signal) Wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

// Notify wakes the current waiters; later Waits get a new channel.
func (s *Signal) Notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.ch)
	s.ch = make(chan struct{})
}
