package broadcast

import "testing"

// TestSignal: Notify closes the channel every earlier Wait returned, and only those.
func TestSignal(t *testing.T) {
	s := New()
	a, b := s.Wait(), s.Wait()
	select {
	case <-a:
		t.Fatal("closed before any Notify")
	default:
	}
	s.Notify()
	for name, ch := range map[string]<-chan struct{}{"a": a, "b": b} {
		select {
		case <-ch:
		default:
			t.Errorf("waiter %s not woken by Notify", name)
		}
	}
	select {
	case <-s.Wait():
		t.Error("a Wait after Notify is already closed")
	default:
	}
}
