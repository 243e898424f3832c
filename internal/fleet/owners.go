package fleet

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// OwnerTTL bounds how long a claim outlives a replica that died without
// releasing it.
const OwnerTTL = 24 * time.Hour

// Owners records which replica owns a resource that cannot move between
// replicas (a browser session: its Chromium process), so that another
// replica can name the owner instead of answering "no such session".
type Owners struct {
	f    *Fleet
	kind string
}

// Owners returns the registry of one kind of resource.
func (f *Fleet) Owners(kind string) *Owners { return &Owners{f: f, kind: kind} }

// Claim records replica as the owner of id.
func (o *Owners) Claim(ctx context.Context, id, replica string) error {
	if err := o.f.rdb.Set(ctx, o.f.key("owner", o.kind, id), replica, OwnerTTL).Err(); err != nil {
		return unavailable("claim", err)
	}
	return nil
}

// Release forgets id's owner.
func (o *Owners) Release(ctx context.Context, id string) error {
	if err := o.f.rdb.Del(ctx, o.f.key("owner", o.kind, id)).Err(); err != nil {
		return unavailable("release", err)
	}
	return nil
}

// Owner returns id's owner, or "" when none is recorded.
func (o *Owners) Owner(ctx context.Context, id string) (string, error) {
	v, err := o.f.rdb.Get(ctx, o.f.key("owner", o.kind, id)).Result()
	if err == redis.Nil {
		return "", nil
	}
	if err != nil {
		return "", unavailable("owner", err)
	}
	return v, nil
}
