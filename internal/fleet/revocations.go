package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
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

func (r *Revocations) epochKey() string { return r.f.key("revocations", "epoch") }

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
	out, err := decodeRevocations(m)
	if err != nil {
		return nil, unavailable("list revocations", err)
	}
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
// confirmed or ctx ends; the watching goes on in loops (the caller's group
// of background loops, which waits for it after ctx ends).
func (r *Revocations) Watch(ctx context.Context, loops *sync.WaitGroup, changed func(), logger *slog.Logger) error {
	_, _, channel := r.keys()
	ready := make(chan error, 1)
	loops.Go(func() {
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
	})
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

// ---------------------------------------------------------------------------
// The epoch of the set

// States of an Epoch.
const (
	// EpochInit: the set was created empty by the first replica of a new
	// fleet.
	EpochInit = "init"
	// EpochRestored: an operator wrote the set (airlock admin revocations
	// restore); every replica adopts it, whatever epoch it knew.
	EpochRestored = "restored"
	// EpochLost: a replica found the set lost (its epoch gone, moved
	// backwards or replaced) and says so to every replica, including new
	// ones that remember nothing, until an operator restores the set.
	EpochLost = "lost"
)

// Epoch marks one lineage of the revocation set in Redis, in the key
// <prefix>revocations:epoch, beside the set and its version counter (the
// generation: bumped by every change). A Redis restarted without its data
// has no epoch; one restored from an older snapshot has the epoch with a
// lower generation. A replica compares what it finds with what it
// remembers (see ReplicaRevocations).
type Epoch struct {
	ID    int64     `json:"id,string"` // random, > 0
	State string    `json:"state"`     // EpochInit, EpochRestored or EpochLost
	At    time.Time `json:"at"`
	By    string    `json:"by,omitempty"`    // the replica (or the CLI) that wrote it
	Cause string    `json:"cause,omitempty"` // EpochLost: why
}

// snapshot is one consistent read of the set's epoch, generation and
// (when asked) members.
type snapshot struct {
	raw   string // the epoch key as stored; "" when absent
	epoch Epoch  // zero when absent
	gen   uint64
	list  []store.Revocation
}

// errEpochMoved: a write found another epoch than the one it expected.
var errEpochMoved = errors.New("fleet: the revocation epoch moved")

const epochMovedReply = "AIRLOCK_EPOCH"

// read returns the epoch, the generation and, with members, the set, in
// one MULTI.
func (r *Revocations) read(ctx context.Context, members bool) (snapshot, error) {
	set, version, _ := r.keys()
	var ep, ver *redis.StringCmd
	var all *redis.MapStringStringCmd
	_, err := r.f.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		ep = p.Get(ctx, r.epochKey())
		ver = p.Get(ctx, version)
		if members {
			all = p.HGetAll(ctx, set)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return snapshot{}, unavailable("read revocations", err)
	}
	var s snapshot
	if raw, err := ep.Result(); err == nil {
		s.raw = raw
		if err := json.Unmarshal([]byte(raw), &s.epoch); err != nil || s.epoch.ID <= 0 {
			// Unreadable: judged lost, never adopted.
			s.epoch = Epoch{}
		}
	} else if !errors.Is(err, redis.Nil) {
		return snapshot{}, unavailable("read revocations", err)
	}
	if v, err := ver.Uint64(); err == nil {
		s.gen = v
	} else if !errors.Is(err, redis.Nil) {
		return snapshot{}, unavailable("read revocations", err)
	}
	if members {
		m, err := all.Result()
		if err != nil {
			return snapshot{}, unavailable("read revocations", err)
		}
		if s.list, err = decodeRevocations(m); err != nil {
			return snapshot{}, unavailable("read revocations", err)
		}
	}
	return s, nil
}

func decodeRevocations(m map[string]string) ([]store.Revocation, error) {
	out := make([]store.Revocation, 0, len(m))
	for subject, raw := range m {
		var v revocationValue
		if err := json.Unmarshal([]byte(raw), &v); err != nil {
			return nil, fmt.Errorf("revocation %q: %v", subject, err)
		}
		out = append(out, store.Revocation{Subject: subject, Reason: v.Reason, Created: v.Created.UTC()})
	}
	sortRevocations(out)
	return out, nil
}

// swapEpochScript sets the epoch to ARGV[2] if it is still ARGV[1] (""
// for absent) and announces it on the change channel.
var swapEpochScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == false then cur = '' end
if cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('PUBLISH', ARGV[3], '')
return 1
`)

// swapEpoch replaces the epoch stored as old ("" for none) with e; false
// when it was not old any more.
func (r *Revocations) swapEpoch(ctx context.Context, old string, e Epoch) (string, bool, error) {
	raw, err := json.Marshal(e)
	if err != nil {
		return "", false, err
	}
	_, _, channel := r.keys()
	n, err := swapEpochScript.Run(ctx, r.f.rdb, []string{r.epochKey()}, old, string(raw), channel).Int()
	if err != nil {
		return "", false, unavailable("write the revocation epoch", err)
	}
	return string(raw), n == 1, nil
}

// writeScript revokes (ARGV[2] = "1") or unrevokes a subject if the epoch
// is still ARGV[1]; it returns how many fields changed.
var writeScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('` + epochMovedReply + ` the revocation epoch moved') end
local n
if ARGV[2] == '1' then
	n = redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
else
	n = redis.call('HDEL', KEYS[2], ARGV[3])
end
redis.call('INCR', KEYS[3])
redis.call('PUBLISH', ARGV[5], ARGV[3])
return n
`)

// writeAt revokes (value != nil) or unrevokes subject in the epoch stored
// as epoch; errEpochMoved when the epoch is another.
func (r *Revocations) writeAt(ctx context.Context, epoch, subject string, value []byte) (int, error) {
	set, version, channel := r.keys()
	op, v := "0", ""
	if value != nil {
		op, v = "1", string(value)
	}
	n, err := writeScript.Run(ctx, r.f.rdb, []string{r.epochKey(), set, version}, epoch, op, subject, v, channel).Int()
	if err != nil {
		if strings.HasPrefix(err.Error(), epochMovedReply) {
			return 0, errEpochMoved
		}
		return 0, unavailable("revoke", err)
	}
	return n, nil
}

// restore replaces the set with list under the new epoch e, bumps the
// generation and announces the change, in one MULTI. It returns the epoch
// as stored and the generation.
func (r *Revocations) restore(ctx context.Context, list []store.Revocation, e Epoch) (string, uint64, error) {
	raw, err := json.Marshal(e)
	if err != nil {
		return "", 0, err
	}
	fields := make([]any, 0, 2*len(list))
	for _, rv := range list {
		if err := store.ValidateSubject(rv.Subject); err != nil {
			return "", 0, err
		}
		created := rv.Created
		if created.IsZero() {
			created = e.At
		}
		v, err := json.Marshal(revocationValue{Reason: rv.Reason, Created: created.UTC()})
		if err != nil {
			return "", 0, err
		}
		fields = append(fields, rv.Subject, v)
	}
	set, version, channel := r.keys()
	var gen *redis.IntCmd
	_, err = r.f.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, set)
		if len(fields) > 0 {
			p.HSet(ctx, set, fields...)
		}
		gen = p.Incr(ctx, version)
		p.Set(ctx, r.epochKey(), raw, 0)
		p.Publish(ctx, channel, "")
		return nil
	})
	if err != nil {
		return "", 0, unavailable("restore revocations", err)
	}
	return string(raw), uint64(gen.Val()), nil
}
