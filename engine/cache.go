package engine

import (
	"github.com/airlockhq/airlock/internal/httpcache"
)

// Cache outcomes reported in HTTPResponse.Cache.
const (
	CacheHit  = httpcache.Hit
	CacheMiss = httpcache.Miss
	CacheSkip = httpcache.Skip // asked for, but the request or response may not be shared
)
