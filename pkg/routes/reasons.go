package routes

import "github.com/gpushare/gpushare/pkg/frontend"

// reject classifies an error of cache.Fits as filter answers it (frontend.Reasons).
func (s *server) reject(err error) frontend.Rejection { return s.reasons.Reject(err) }
