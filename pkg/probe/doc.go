// Package probe is gpushare-probe's logic: inside a container it reads what the container was
// given (the handover's environment, the simulated cards' files, the device nodes), what the
// CUDA driver shows (cards, memory, MPS) and how much device memory it can really allocate,
// and gives a verdict against what the node's isolation label promises.
//
// The CUDA driver API sits behind Driver (the real one is pkg/probe/cuda, loaded at run time
// without cgo), so the rules are tested with a fake. Run returns a Result; its JSON line is
// what `kubectl inspect gpushare --verify` reads from the pod's log (ParseResult).
//
// Verdicts (Verdict): VerdictEnforced, VerdictNotEnforced (exit 1), VerdictCannotVerify
// (exit 2): a check that needs the driver on a node whose cards are simulated, or whose
// container has no libcuda.so.1, cannot verify; the card and environment checks still give
// real verdicts there.
package probe
