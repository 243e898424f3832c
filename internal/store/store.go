// Package store owns Airlock's persistent state behind small interfaces:
// the audit log ([AuditLog]), the revocation set ([Revocations]), API token
// hashes ([Tokens]), the HTTP cache ([Cache]) and crawl jobs ([Jobs]).
//
// [SQLite] is the embedded implementation: one file in the data directory,
// shared safely by every airlock process that opens it (serve, mcp,
// serve-guest, the CLI verbs). A shared Redis implementation lives in its own
// package. Both must pass the conformance suites in package storetest, which
// define the behaviour these interfaces only summarise.
//
// Every method takes a context first, is safe for concurrent use, and
// reports failures wrapped with a short operation phrase around the
// sentinels below; inspect them with errors.Is.
package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Sentinel errors. Implementations wrap them; compare with errors.Is.
var (
	// ErrNotFound: the token, revocation or cache entry does not exist (an
	// expired cache entry does not exist).
	ErrNotFound = errors.New("store: not found")
	// ErrExists: AddToken was given a hash that is already stored.
	ErrExists = errors.New("store: already exists")
	// ErrInvalid: an argument breaks the documented contract (a record
	// without ID, a token that is not a hash, an empty partition, ...).
	// Nothing was written.
	ErrInvalid = errors.New("store: invalid argument")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
)

// ---------------------------------------------------------------------------
// Audit

// Limits of AuditQuery.Limit.
const (
	DefaultQueryLimit = 100
	MaxQueryLimit     = 10000
)

// AuditRecord is one persisted decision of the gate: one broker call. The
// zero value is not storable: ID and Time are required.
type AuditRecord struct {
	ID       string    // decision id, a ULID: unique, and sorts by creation time
	Time     time.Time // when the decision was made; stored to the nanosecond, read back in UTC
	Tenant   string
	Instance string
	Broker   string // http, tcp, udp, tls, sign, route, fetch, crawl, search, browser, guest, admin
	Outcome  string // allow, deny or error
	Code     string // error code (airlock.Code), "" when allowed
	Reason   string // fine-grained reason ("loopback", "capability", ...)
	Target   string // URL, host:port, route or secret name the call aimed at
	Detail   string

	DurationMS int64
	BytesIn    int64
	BytesOut   int64
}

// Validate reports a record that no implementation stores, as an error
// wrapping ErrInvalid. Implementations call it for every record of a batch
// before writing any.
func (r AuditRecord) Validate() error {
	switch {
	case r.ID == "":
		return fmt.Errorf("%w: audit record without ID", ErrInvalid)
	case r.Time.IsZero():
		return fmt.Errorf("%w: audit record %s without time", ErrInvalid, r.ID)
	}
	return nil
}

// AuditQuery selects audit records. The zero AuditQuery selects the newest
// DefaultQueryLimit records. Filters combine with AND; a zero field does not
// filter. Strings match exactly.
type AuditQuery struct {
	Since time.Time // Time >= Since
	Until time.Time // Time < Until

	Tenant, Instance, Outcome, Broker, Reason string

	// Limit caps the result: <= 0 means DefaultQueryLimit, anything above
	// MaxQueryLimit is MaxQueryLimit.
	Limit int
	// BeforeID pages: only records whose ID sorts before it. Pass the ID of
	// the last record of the previous page.
	BeforeID string
}

// PageSize is the effective limit of q.
func (q AuditQuery) PageSize() int {
	switch {
	case q.Limit <= 0:
		return DefaultQueryLimit
	case q.Limit > MaxQueryLimit:
		return MaxQueryLimit
	}
	return q.Limit
}

// AuditStat counts the records of one (Broker, Outcome, Reason) group.
type AuditStat struct {
	Broker, Outcome, Reason string
	Count                   int64
}

// AuditLog is the persistent audit log.
//
// AppendAudit stores a batch in one transaction: all records or none. It is
// idempotent on ID: a record whose ID is already stored is skipped (the
// stored one wins), so a batch retried after an ambiguous failure never
// duplicates. An empty batch is a no-op. A record failing
// AuditRecord.Validate fails the whole batch with ErrInvalid.
//
// QueryAudit returns matching records newest first, ordered by ID
// descending (ULIDs sort by time), at most q.PageSize() of them; an empty
// result is a nil slice and no error.
//
// AuditStats counts records with Time >= since (zero: all) by (Broker,
// Outcome, Reason), largest count first, ties in ascending
// (Broker, Outcome, Reason) order.
//
// PruneAudit enforces retention: it deletes every record with Time before
// olderThan (zero: no age limit), then the oldest records by ID beyond the
// newest maxRows (<= 0: no size limit). It returns how many it deleted.
type AuditLog interface {
	AppendAudit(ctx context.Context, records []AuditRecord) error
	QueryAudit(ctx context.Context, q AuditQuery) ([]AuditRecord, error)
	// AuditStats counts decisions since a time by broker, outcome and
	// reason, for one tenant or ("") all of them.
	AuditStats(ctx context.Context, since time.Time, tenant string) ([]AuditStat, error)
	PruneAudit(ctx context.Context, olderThan time.Time, maxRows int64) (deleted int64, err error)
}

// ---------------------------------------------------------------------------
// Revocations

// Revocation is one revoked subject.
type Revocation struct {
	Subject string    // "tenant" or "tenant/instance"
	Reason  string    // free text given to Revoke
	Created time.Time // when the subject was (last) revoked, UTC
}

// ValidateSubject reports a revocation subject that is not "tenant" or
// "tenant/instance" with both parts non-empty, as an error wrapping
// ErrInvalid. Everything after the first slash is the instance.
func ValidateSubject(subject string) error {
	tenant, instance, hasSlash := strings.Cut(subject, "/")
	if tenant == "" || (hasSlash && instance == "") {
		return fmt.Errorf("%w: revocation subject %q: want \"tenant\" or \"tenant/instance\"", ErrInvalid, subject)
	}
	return nil
}

// Revocations is the persistent revocation set, shared by every process
// (or replica) using the same store.
//
// Revoke adds subject (see ValidateSubject) or, if it is already revoked,
// replaces its reason; revoking a tenant does not list its instances, the
// caller checks both "tenant" and "tenant/instance". Unrevoke removes it, or
// returns ErrNotFound. ListRevocations returns the set in ascending subject
// order (nil when empty).
//
// RevocationVersion is a cheap change detector for pollers: its value
// changes whenever any process commits a change to the set, and never
// returns to an earlier value. Read it before ListRevocations, so that a
// change committed in between is seen by the next poll. The value means
// nothing else and differs between implementations.
type Revocations interface {
	Revoke(ctx context.Context, subject, reason string) error
	Unrevoke(ctx context.Context, subject string) error
	ListRevocations(ctx context.Context) ([]Revocation, error)
	RevocationVersion(ctx context.Context) (uint64, error)
}

// ---------------------------------------------------------------------------
// Tokens

// TokenHashPrefix starts every token hash.
const TokenHashPrefix = "sha256:"

// HashToken returns the stored form of a plaintext API token:
// "sha256:" and 64 lowercase hex digits.
func HashToken(plaintext string) string {
	sum := sha256.Sum256([]byte(plaintext))
	return TokenHashPrefix + hex.EncodeToString(sum[:])
}

// ValidateTokenHash reports a string that is not in the form HashToken
// makes, as an error wrapping ErrInvalid. It keeps plaintext tokens out of
// the store.
func ValidateTokenHash(hash string) error {
	h, ok := strings.CutPrefix(hash, TokenHashPrefix)
	if !ok || len(h) != 2*sha256.Size || strings.ToLower(h) != h {
		return fmt.Errorf("%w: token hash: want %q and 64 lowercase hex digits", ErrInvalid, TokenHashPrefix)
	}
	if _, err := hex.DecodeString(h); err != nil {
		return fmt.Errorf("%w: token hash: want %q and 64 lowercase hex digits", ErrInvalid, TokenHashPrefix)
	}
	return nil
}

// Token is an API token as stored: its hash, never the token itself.
type Token struct {
	Hash    string    // HashToken of the plaintext token
	Tenant  string    // required
	Label   string    // free text for operators
	Created time.Time // zero on AddToken: the store sets the current time; read back in UTC
}

// Tokens stores API token hashes.
//
// AddToken stores t; a hash that fails ValidateTokenHash or an empty tenant
// is ErrInvalid, a hash already stored is ErrExists. LookupToken and
// DeleteToken return ErrNotFound for an unknown hash. ListTokens returns
// the tokens of tenant ("" : of every tenant), oldest first, ties by hash
// (nil when none).
type Tokens interface {
	AddToken(ctx context.Context, t Token) error
	LookupToken(ctx context.Context, hash string) (Token, error)
	ListTokens(ctx context.Context, tenant string) ([]Token, error)
	DeleteToken(ctx context.Context, hash string) error
}

// ---------------------------------------------------------------------------
// HTTP cache

// CacheEntry is one stored HTTP response.
type CacheEntry struct {
	Status int
	Header http.Header
	// RequestHeader holds the request fields the response varies on (named
	// by its Vary), so that a later request can be matched against them.
	RequestHeader http.Header
	Body          []byte
	// Stored is when the response was received; PruneCache evicts the
	// oldest first. Read back in UTC.
	Stored time.Time
	// Expires is when the store forgets the entry (zero: never, until
	// evicted). It is not the HTTP freshness lifetime: a caller that wants
	// to revalidate stale responses sets it past their freshness.
	Expires time.Time
}

// Size is what e counts against PruneCache's maxBytes: the body plus the
// names and values of both headers.
func (e CacheEntry) Size() int64 {
	n := int64(len(e.Body))
	for _, h := range []http.Header{e.Header, e.RequestHeader} {
		for k, vs := range h {
			n += int64(len(k))
			for _, v := range vs {
				n += int64(len(v))
			}
		}
	}
	return n
}

// ValidateCacheKey reports an empty partition or key as an error wrapping
// ErrInvalid: a missing partition would let tenants share entries.
func ValidateCacheKey(partition, key string) error {
	if partition == "" || key == "" {
		return fmt.Errorf("%w: cache partition and key must not be empty", ErrInvalid)
	}
	return nil
}

// Cache stores HTTP responses by (partition, key). The partition is the
// tenant: entries of one partition are never visible through another.
//
// GetCacheEntry returns ErrNotFound when the entry is absent or expired.
// PutCacheEntry stores or replaces an entry. DeleteCacheEntry removes one
// and is not an error when it is absent. PruneCache deletes expired
// entries, then the oldest (by Stored) until the sum of CacheEntry.Size is
// at most maxBytes (<= 0: no size limit); it returns how many it deleted.
type Cache interface {
	GetCacheEntry(ctx context.Context, partition, key string) (CacheEntry, error)
	PutCacheEntry(ctx context.Context, partition, key string, e CacheEntry) error
	DeleteCacheEntry(ctx context.Context, partition, key string) error
	PruneCache(ctx context.Context, maxBytes int64) (deleted int64, err error)
}
