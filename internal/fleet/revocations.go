package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/airlockhq/airlock/internal/store"
)

// Revocations is a store.Revocations in Redis: a hash of subjects, a
// version counter bumped by every change, and a pub/sub channel that
// announces each change so that every replica refreshes at once instead of
// at its next poll.
type Revocations struct{ f *Fleet }

// Revocations returns the fleet-wide revocation store.
func (f *Fleet) Revocations() *Revocations { return &Revocations{f: f} }

type revocationValue struct {
	Reason  string    `json:"reason,omitempty"`
	Created time.Time `json:"created"`
}

func (r *Revocations) keys() (set, version, channel string) {
	return r.f.key("revocations"), r.f.key("revocations", "version"), r.f.key("revocations", "changed")
}

// Revoke implements store.Revocations.
func (r *Revocations) Revoke(ctx context.Context, subject, reason string) error {
	if err := store.ValidateSubject(subject); err != nil {
		return err
	}
	v, err := json.Marshal(revocationValue{Reason: reason, Created: time.Now().UTC()})
	if err != nil {
		return err
	}
	set, version, channel := r.keys()
	_, err = r.f.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, set, subject, v)
		p.Incr(ctx, version)
		p.Publish(ctx, channel, subject)
		return nil
	})
	if err != nil {
		return unavailable("revoke", err)
	}
	return nil
}

// Unrevoke implements store.Revocations.
func (r *Revocations) Unrevoke(ctx context.Context, subject string) error {
	if err := store.ValidateSubject(subject); err != nil {
		return err
	}
	set, version, channel := r.keys()
	var del *redis.IntCmd
	_, err := r.f.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		del = p.HDel(ctx, set, subject)
		p.Incr(ctx, version)
		p.Publish(ctx, channel, subject)
		return nil
	})
	if err != nil {
		return unavailable("unrevoke", err)
	}
	if del.Val() == 0 {
		return fmt.Errorf("unrevoke %s: %w", subject, store.ErrNotFound)
	}
	return nil
}

// ListRevocations implements store.Revocations, sorted by subject.
func (r *Revocations) ListRevocations(ctx context.Context) ([]store.Revocation, error) {
	set, _, _ := r.keys()
	m, err := r.f.rdb.HGetAll(ctx, set).Result()
	if err != nil {
		return nil, unavailable("list revocations", err)
	}
	out := make([]store.Revocation, 0, len(m))
	for subject, raw := range m {
		var v revocationValue
		if err := json.Unmarshal([]byte(raw), &v); err != nil {
			return nil, unavailable("list revocations", fmt.Errorf("revocation %q: %v", subject, err))
		}
		out = append(out, store.Revocation{Subject: subject, Reason: v.Reason, Created: v.Created.UTC()})
	}
	sortRevocations(out)
	return out, nil
}

// RevocationVersion implements store.Revocations.
func (r *Revocations) RevocationVersion(ctx context.Context) (uint64, error) {
	_, version, _ := r.keys()
	v, err := r.f.rdb.Get(ctx, version).Uint64()
	if err == redis.Nil {
		return 0, nil
	}
	if err != nil {
		return 0, unavailable("revocation version", err)
	}
	return v, nil
}

// Watch calls changed after every change announced on the channel, until
// ctx ends, resubscribing (with backoff) when the connection drops; it
// also calls changed after each (re)subscription, since announcements may
// have been missed meanwhile. It returns once the first subscription is
// confirmed or ctx ends.
func (r *Revocations) Watch(ctx context.Context, changed func(), logger *slog.Logger) error {
	_, _, channel := r.keys()
	ready := make(chan error, 1)
	go func() {
		backoff := 50 * time.Millisecond
		first := true
		for ctx.Err() == nil {
			sub := r.f.rdb.Subscribe(ctx, channel)
			_, err := sub.Receive(ctx) // the subscription confirmation
			if err != nil {
				sub.Close()
				if first {
					ready <- unavailable("subscribe", err)
					first = false
				}
				logger.Warn("revocation channel: resubscribing", slog.String("error", err.Error()), slog.Duration("backoff", backoff))
				select {
				case <-ctx.Done():
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, 5*time.Second)
				continue
			}
			backoff = 50 * time.Millisecond
			if first {
				ready <- nil
				first = false
			}
			changed()
			ch := sub.Channel(redis.WithChannelHealthCheckInterval(time.Second))
		loop:
			for {
				select {
				case <-ctx.Done():
					break loop
				case _, ok := <-ch:
					if !ok {
						break loop
					}
					changed()
				}
			}
			sub.Close()
		}
	}()
	select {
	case err := <-ready:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

var _ store.Revocations = (*Revocations)(nil)

func sortRevocations(r []store.Revocation) {
	slices.SortFunc(r, func(a, b store.Revocation) int { return strings.Compare(a.Subject, b.Subject) })
}
