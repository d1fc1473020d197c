// Package demo holds the test of the README's first command (TestDemo, build tag demo,
// run by `make demo-test` as part of `make test`) and the reader of what the demo prints.
package demo
