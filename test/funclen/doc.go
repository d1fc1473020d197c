// Package funclen keeps every product function short: a test (so `make lint` runs it)
// parses each non-test .go file under cmd/, pkg/ and internal/ with go/ast and fails naming
// every function or method longer than MaxLines lines, from its func keyword to its
// closing brace. A long function is split into named steps (small functions in files
// named after them) rather than allowed here.
package funclen
