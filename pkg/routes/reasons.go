package routes

import "github.com/gpushare/gpushare/pkg/reasons"

// reject classifies an error of cache.Fits as filter answers it (reasons.Wording).
func (s *server) reject(err error) reasons.Rejection { return s.wording.Reject(err) }
