package httpcache

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
	"github.com/airlockhq/airlock/internal/store"
)

// Cache outcomes reported in HTTPResponse.Cache.
const (
	Hit  = "hit"
	Miss = "miss"
	Skip = "bypass" // asked for, but the request or response may not be shared
)

// Entries is the store of cached answers, partitioned by tenant.
type Entries interface {
	GetCacheEntry(ctx context.Context, partition, key string) (store.CacheEntry, error)
	PutCacheEntry(ctx context.Context, partition, key string, e store.CacheEntry) error
}

// Serve answers a GET from partition part of st (this package's rules)
// or makes it with do and stores the answer. The policy runs on hits too:
// decide decides the target again before a cached answer is returned.
func Serve(ctx context.Context, st Entries, part string, r *egress.Request, do func() (*airlock.HTTPResponse, int64, error),
	decide func(egress.Target) error, logger *slog.Logger) (*airlock.HTTPResponse, int64, error) {
	if !Cacheable(r) {
		resp, in, err := do()
		if resp != nil {
			resp.Cache = Skip
		}
		return resp, in, err
	}
	t, err := egress.ParseURL(r.URL)
	if err != nil {
		return nil, 0, err
	}
	key := Key(t, r)
	if ent, err := st.GetCacheEntry(ctx, part, key); err == nil && Matches(ent, r.Header) {
		if err := decide(t); err != nil {
			return nil, 0, err
		}
		return &airlock.HTTPResponse{Status: ent.Status, Header: ent.Header, Body: ent.Body, URL: t.String(), Proto: "cache", Cache: Hit}, 0, nil
	}
	resp, in, err := do()
	if err != nil {
		return nil, in, err
	}
	resp.Cache = Miss
	if ent, ok := Entry(ctx, r, resp, time.Now()); ok {
		if err := st.PutCacheEntry(ctx, part, key, ent); err != nil && !errors.Is(err, context.Canceled) {
			logger.Warn("http cache store", "error", err.Error())
		}
	}
	return resp, in, nil
}
