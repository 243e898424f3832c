package gate

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/store"
)

// RevocationSet answers "is this principal revoked?" on every broker call,
// from memory, and keeps that memory in step with the shared store: a
// revocation written by any process sharing the store is picked up within
// one poll interval. A tenant's revocation covers all its instances.
type RevocationSet struct {
	st       store.Revocations
	lost     LostStore // st, when it can find the set lost
	poll     time.Duration
	logger   *slog.Logger
	onChange func()

	set     atomic.Pointer[map[string]store.Revocation]
	version atomic.Uint64
	lastOK  atomic.Int64 // unix nanoseconds of the last successful refresh
	// maxStale, when positive, is how old the last successful refresh may
	// be before the set is Stale (a shared store that cannot be reached).
	maxStale atomic.Int64
	// unloaded is set while the set in memory predates a loss of the
	// shared set: it stays Stale until a refresh has loaded the list
	// again, so that the moment the loss clears (a restore) and the
	// restored list is read lets no revoked principal through.
	unloaded atomic.Bool
	mu       sync.Mutex // serialises refreshes
	stop     chan struct{}
	done     chan struct{}
}

// NewRevocationSet loads the current set and starts polling every poll
// (0: 250 ms). onChange, if set, runs after every change is applied.
func NewRevocationSet(ctx context.Context, st store.Revocations, poll time.Duration, logger *slog.Logger, onChange func()) (*RevocationSet, error) {
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	r := &RevocationSet{st: st, poll: poll, logger: logger, onChange: onChange, stop: make(chan struct{}), done: make(chan struct{})}
	r.lost, _ = st.(LostStore)
	empty := map[string]store.Revocation{}
	r.set.Store(&empty)
	if err := r.refresh(ctx, true); err != nil {
		if r.Lost() == nil {
			return nil, err
		}
		// Start refusing every call (Stale) on the last copy, so that an
		// operator can restore the set through this process.
		last, lerr := r.lost.LastKnown(ctx)
		if lerr != nil {
			return nil, err
		}
		m := make(map[string]store.Revocation, len(last))
		for _, rv := range last {
			m[rv.Subject] = rv
		}
		r.set.Store(&m)
	}
	go r.loop()
	return r, nil
}

// LostStore is a shared store.Revocations that can find the set lost (a
// Redis that restarted without its data): it then refuses every read and
// write until an operator restores the set. While Lost is not nil the set
// is Stale, so the gate refuses every call.
type LostStore interface {
	store.Revocations
	// Lost is nil, or why the set is lost (an *airlock.Error, unavailable,
	// revocations_stale).
	Lost() error
	// LastKnown is the last copy of the set kept before it was lost.
	LastKnown(ctx context.Context) ([]store.Revocation, error)
}

// Lost is nil, or why the shared set was found lost (see LostStore).
func (r *RevocationSet) Lost() error {
	if r.lost != nil {
		return r.lost.Lost()
	}
	return nil
}

// SetMaxStale makes the set Stale once no refresh has succeeded for d
// (0: never). A set shared through a store that can fail (Redis) uses it,
// so that a revocation made elsewhere while this process cannot see it
// does not leave a revoked principal working: the gate refuses every call
// while the set is stale.
func (r *RevocationSet) SetMaxStale(d time.Duration) { r.maxStale.Store(int64(d)) }

// Stale reports whether the set may be missing revocations: see
// SetMaxStale and LostStore.
func (r *RevocationSet) Stale() bool {
	if r.Lost() != nil {
		r.unloaded.Store(true)
		return true
	}
	if r.unloaded.Load() {
		return true
	}
	d := r.maxStale.Load()
	return d > 0 && time.Since(time.Unix(0, r.lastOK.Load())) > time.Duration(d)
}

// Refresh reads the store now (a change notification arrived) instead of
// at the next poll.
func (r *RevocationSet) Refresh(ctx context.Context) error { return r.refresh(ctx, false) }

// Revoked reports whether p's tenant or p itself is revoked.
func (r *RevocationSet) Revoked(p airlock.Principal) bool {
	m := *r.set.Load()
	if len(m) == 0 {
		return false
	}
	if _, ok := m[p.Tenant]; ok {
		return true
	}
	if p.Instance != "" {
		_, ok := m[p.String()]
		return ok
	}
	return false
}

// List returns the current revocations.
func (r *RevocationSet) List() []store.Revocation {
	m := *r.set.Load()
	out := make([]store.Revocation, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// Revoke persists a revocation and applies it here at once.
func (r *RevocationSet) Revoke(ctx context.Context, subject, reason string) error {
	if err := r.st.Revoke(ctx, subject, reason); err != nil {
		return err
	}
	r.refreshAfterWrite(ctx, func(m map[string]store.Revocation) {
		m[subject] = store.Revocation{Subject: subject, Reason: reason, Created: time.Now().UTC()}
	})
	return nil
}

// Unrevoke lifts a revocation.
func (r *RevocationSet) Unrevoke(ctx context.Context, subject string) error {
	if err := r.st.Unrevoke(ctx, subject); err != nil {
		return err
	}
	r.refreshAfterWrite(ctx, func(m map[string]store.Revocation) { delete(m, subject) })
	return nil
}

// refreshAfterWrite reloads the set after this process changed the store.
// The change is stored whatever happens next, so a failed reload (a store
// busy under load) must neither report the change as failed nor delay it
// until a poll succeeds: it is then applied to the local copy, and the next
// successful poll, seeing a new version, reloads the whole set.
func (r *RevocationSet) refreshAfterWrite(ctx context.Context, change func(map[string]store.Revocation)) {
	err := r.refresh(ctx, true)
	if err == nil {
		return
	}
	if r.logger != nil {
		r.logger.Error("revocation reload failed; applying the change locally", slog.String("error", err.Error()))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m := maps.Clone(*r.set.Load())
	change(m)
	r.set.Store(&m)
	if r.onChange != nil {
		r.onChange()
	}
}

func (r *RevocationSet) refresh(ctx context.Context, force bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Lost() != nil {
		r.unloaded.Store(true)
	}
	v, err := r.st.RevocationVersion(ctx)
	if err != nil {
		if r.Lost() != nil {
			r.unloaded.Store(true)
		}
		return err
	}
	if !force && v == r.version.Load() && !r.unloaded.Load() {
		r.lastOK.Store(time.Now().UnixNano())
		return nil
	}
	list, err := r.st.ListRevocations(ctx)
	if err != nil {
		return err
	}
	m := make(map[string]store.Revocation, len(list))
	for _, rv := range list {
		m[rv.Subject] = rv
	}
	r.set.Store(&m)
	r.version.Store(v)
	if r.Lost() == nil {
		r.unloaded.Store(false)
	}
	r.lastOK.Store(time.Now().UnixNano())
	if r.onChange != nil {
		r.onChange()
	}
	return nil
}

func (r *RevocationSet) loop() {
	defer close(r.done)
	t := time.NewTicker(r.poll)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			// A lost set was logged once, when it was found lost.
			if err := r.refresh(ctx, false); err != nil && r.logger != nil && r.Lost() == nil {
				r.logger.Error("revocation poll failed; keeping the last known set", slog.String("error", err.Error()))
			}
			cancel()
		}
	}
}

// Close stops polling.
func (r *RevocationSet) Close() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
}

// CheckSubject accepts a revocation subject "tenant" or "tenant/instance"
// in canonical form (ParsePrincipal also reads "tenant/" as the tenant,
// which the store refuses). Errors: invalid (principal).
func CheckSubject(subject string) error {
	p, err := airlock.ParsePrincipal(subject)
	if err != nil {
		return err
	}
	if p.String() != subject {
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonPrincipal, "bad revocation subject %q: want tenant or tenant/instance", subject)
	}
	return nil
}
