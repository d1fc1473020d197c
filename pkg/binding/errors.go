package binding

import "fmt"

// Error is a failed bind with the reason label of gpushare_bind_failures_total
// (metrics.Bind*).
type Error struct {
	Label string
	Err   error
}

func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// Fail is an *Error of label with a formatted error (%w wraps).
func Fail(label string, format string, args ...any) *Error {
	return &Error{Label: label, Err: fmt.Errorf(format, args...)}
}
