package cache

import "unique"

// intern returns s backed by a shared copy: the slim objects intern the strings that repeat
// across thousands of them (a pod's namespace and node name, a card's model), which decoding
// gives every object its own copy of (16–32 bytes each). No handle is kept, so the runtime
// may start a new shared copy after a garbage collection: a few copies per value, never one
// per object, and none outlives the objects that use it.
func intern(s string) string { return unique.Make(s).Value() }
