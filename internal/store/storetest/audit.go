package storetest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/airlockhq/airlock/internal/store"
)

// AuditRecords returns n realistic, distinct audit records, one a
// millisecond from start on, with IDs ULID(time, seq0+i): tenants, brokers,
// outcomes and reasons vary with i so that every filter selects a proper
// subset.
func AuditRecords(start time.Time, seq0 uint64, n int) []store.AuditRecord {
	brokers := []string{"fetch", "http", "tcp", "sign", "browser"}
	out := make([]store.AuditRecord, n)
	for i := range out {
		ts := start.Add(time.Duration(i) * time.Millisecond)
		r := store.AuditRecord{
			ID:         ULID(ts, seq0+uint64(i)),
			Time:       ts,
			Tenant:     []string{"acme", "globex"}[i%2],
			Instance:   fmt.Sprintf("inst-%d", i%3),
			Broker:     brokers[i%len(brokers)],
			Outcome:    "allow",
			Target:     fmt.Sprintf("https://example.com/page/%d?q=airlock", i),
			Detail:     "GET 200 text/html; charset=utf-8",
			DurationMS: int64(i % 250),
			BytesIn:    int64(1024 + i),
			BytesOut:   int64(256 + i%17),
		}
		switch {
		case i%7 == 0:
			r.Outcome, r.Code, r.Reason = "deny", "denied", "loopback"
		case i%7 == 3:
			r.Outcome, r.Code, r.Reason = "deny", "rate_limited", "tenant_rate"
		case i%11 == 5:
			r.Outcome, r.Code, r.Reason = "error", "timeout", "timeout"
		}
		out[i] = r
	}
	return out
}

// auditModel is the reference semantics of QueryAudit.
func auditModel(all []store.AuditRecord, q store.AuditQuery) []store.AuditRecord {
	var out []store.AuditRecord
	for _, r := range all {
		switch {
		case !q.Since.IsZero() && r.Time.Before(q.Since),
			!q.Until.IsZero() && !r.Time.Before(q.Until),
			q.Tenant != "" && r.Tenant != q.Tenant,
			q.Instance != "" && r.Instance != q.Instance,
			q.Outcome != "" && r.Outcome != q.Outcome,
			q.Broker != "" && r.Broker != q.Broker,
			q.Reason != "" && r.Reason != q.Reason,
			q.BeforeID != "" && r.ID >= q.BeforeID:
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b store.AuditRecord) int { return cmp.Compare(b.ID, a.ID) })
	if len(out) > q.PageSize() {
		out = out[:q.PageSize()]
	}
	return out
}

// statsModel is the reference semantics of AuditStats.
func statsModel(all []store.AuditRecord, since time.Time, tenant string) []store.AuditStat {
	counts := map[store.AuditStat]int64{}
	for _, r := range all {
		if !since.IsZero() && r.Time.Before(since) || tenant != "" && r.Tenant != tenant {
			continue
		}
		counts[store.AuditStat{Broker: r.Broker, Outcome: r.Outcome, Reason: r.Reason}]++
	}
	var out []store.AuditStat
	for k, n := range counts {
		k.Count = n
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b store.AuditStat) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Broker, b.Broker),
			cmp.Compare(a.Outcome, b.Outcome), cmp.Compare(a.Reason, b.Reason))
	})
	return out
}

// queryAll returns every record of l, newest first (at most MaxQueryLimit).
func queryAll(t *testing.T, l store.AuditLog) []store.AuditRecord {
	t.Helper()
	got, err := l.QueryAudit(ctx(t), store.AuditQuery{Limit: store.MaxQueryLimit})
	must(t, "QueryAudit", err)
	return got
}

func diffRecords(t *testing.T, what string, got, want []store.AuditRecord) {
	t.Helper()
	if d := gocmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("%s: records differ (-want +got):\n%s", what, d)
	}
}

// RunAuditLog runs the conformance suite of store.AuditLog.
func RunAuditLog(t *testing.T, open func(t *testing.T) store.AuditLog) {
	t.Run("RoundTrip", func(t *testing.T) {
		l := open(t)
		r := store.AuditRecord{
			ID:         ULID(base, 1),
			Time:       base.In(time.FixedZone("X", 5*3600+1800)),
			Tenant:     "acme",
			Instance:   "mcp/conn-7",
			Broker:     "fetch",
			Outcome:    "deny",
			Code:       "denied",
			Reason:     "metadata",
			Target:     "http://169.254.169.254/latest/meta-data/",
			Detail:     "unicode ✓, quotes \" ' and \x00 bytes",
			DurationMS: 12,
			BytesIn:    1 << 40,
			BytesOut:   -1,
		}
		must(t, "AppendAudit", l.AppendAudit(ctx(t), []store.AuditRecord{r}))
		got := queryAll(t, l)
		diffRecords(t, "QueryAudit", got, []store.AuditRecord{r})
		if len(got) == 1 && got[0].Time.Location() != time.UTC {
			t.Errorf("Time location = %v, want UTC", got[0].Time.Location())
		}
	})

	t.Run("EmptyBatch", func(t *testing.T) {
		l := open(t)
		must(t, "AppendAudit(nil)", l.AppendAudit(ctx(t), nil))
		must(t, "AppendAudit([])", l.AppendAudit(ctx(t), []store.AuditRecord{}))
		if got := queryAll(t, l); len(got) != 0 {
			t.Errorf("QueryAudit on an empty log = %d records, want none", len(got))
		}
	})

	t.Run("InvalidBatchWritesNothing", func(t *testing.T) {
		l := open(t)
		good := AuditRecords(base, 0, 3)
		for name, bad := range map[string]store.AuditRecord{
			"no ID":   {Time: base, Tenant: "acme"},
			"no time": {ID: ULID(base, 99), Tenant: "acme"},
		} {
			batch := append(slices.Clone(good), bad)
			wantErr(t, "AppendAudit with "+name, l.AppendAudit(ctx(t), batch), store.ErrInvalid)
		}
		if got := queryAll(t, l); len(got) != 0 {
			t.Errorf("after invalid batches the log holds %d records, want none", len(got))
		}
	})

	t.Run("IdempotentOnID", func(t *testing.T) {
		l := open(t)
		recs := AuditRecords(base, 0, 40)
		must(t, "AppendAudit", l.AppendAudit(ctx(t), recs))
		must(t, "AppendAudit retried", l.AppendAudit(ctx(t), recs))

		// An overlapping batch: its old half is skipped (the stored record
		// wins even when the retry differs), its new half is stored.
		more := AuditRecords(base.Add(time.Minute), 1000, 10)
		changed := recs[5]
		changed.Outcome, changed.Reason = "error", "changed"
		batch := append([]store.AuditRecord{changed}, recs[20:]...)
		batch = append(batch, more...)
		batch = append(batch, more[0]) // a duplicate inside one batch
		must(t, "AppendAudit overlapping", l.AppendAudit(ctx(t), batch))

		diffRecords(t, "after retries", queryAll(t, l), auditModel(append(recs, more...), store.AuditQuery{Limit: store.MaxQueryLimit}))
	})

	t.Run("Filters", func(t *testing.T) {
		l := open(t)
		recs := AuditRecords(base, 0, 300)
		must(t, "AppendAudit", l.AppendAudit(ctx(t), recs[:150]))
		must(t, "AppendAudit", l.AppendAudit(ctx(t), recs[150:]))
		for _, tc := range []struct {
			name string
			q    store.AuditQuery
		}{
			{name: "zero query: newest DefaultQueryLimit", q: store.AuditQuery{}},
			{name: "limit", q: store.AuditQuery{Limit: 7}},
			{name: "limit above max", q: store.AuditQuery{Limit: store.MaxQueryLimit + 1}},
			{name: "negative limit", q: store.AuditQuery{Limit: -1}},
			{name: "tenant", q: store.AuditQuery{Tenant: "globex", Limit: 1000}},
			{name: "instance", q: store.AuditQuery{Instance: "inst-2", Limit: 1000}},
			{name: "outcome", q: store.AuditQuery{Outcome: "deny", Limit: 1000}},
			{name: "broker", q: store.AuditQuery{Broker: "tcp", Limit: 1000}},
			{name: "reason", q: store.AuditQuery{Reason: "loopback", Limit: 1000}},
			{name: "since is inclusive", q: store.AuditQuery{Since: recs[100].Time, Limit: 1000}},
			{name: "until is exclusive", q: store.AuditQuery{Until: recs[100].Time, Limit: 1000}},
			{name: "time window", q: store.AuditQuery{Since: recs[10].Time, Until: recs[20].Time}},
			{name: "before id", q: store.AuditQuery{BeforeID: recs[50].ID, Limit: 1000}},
			{name: "combined", q: store.AuditQuery{
				Tenant: "acme", Outcome: "deny", Broker: "fetch", Since: recs[30].Time,
				Until: recs[290].Time, Limit: 1000,
			}},
			{name: "distant bounds", q: store.AuditQuery{
				Since: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), Until: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC),
			}},
			{name: "no match", q: store.AuditQuery{Tenant: "initech"}},
			{name: "unknown outcome", q: store.AuditQuery{Outcome: "maybe"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, err := l.QueryAudit(ctx(t), tc.q)
				must(t, "QueryAudit", err)
				want := auditModel(recs, tc.q)
				if tc.name != "no match" && tc.name != "unknown outcome" && len(want) == 0 {
					t.Fatal("bad fixture: the query should select something")
				}
				diffRecords(t, fmt.Sprintf("QueryAudit(%+v)", tc.q), got, want)
			})
		}
	})

	t.Run("Paging", func(t *testing.T) {
		l := open(t)
		// Appended out of order, in several batches: order comes from IDs.
		recs := AuditRecords(base, 0, 95)
		must(t, "AppendAudit", l.AppendAudit(ctx(t), recs[60:]))
		must(t, "AppendAudit", l.AppendAudit(ctx(t), recs[:30]))
		must(t, "AppendAudit", l.AppendAudit(ctx(t), recs[30:60]))
		for _, filter := range []store.AuditQuery{{}, {Tenant: "acme"}, {Outcome: "deny"}} {
			q := filter
			q.Limit = 7
			var all []store.AuditRecord
			for page := 0; ; page++ {
				if page > 100 {
					t.Fatal("paging does not end")
				}
				got, err := l.QueryAudit(ctx(t), q)
				must(t, "QueryAudit", err)
				if len(got) > q.Limit {
					t.Fatalf("page of %d records, limit %d", len(got), q.Limit)
				}
				if len(got) == 0 {
					break
				}
				all = append(all, got...)
				q.BeforeID = got[len(got)-1].ID
			}
			filter.Limit = store.MaxQueryLimit
			diffRecords(t, fmt.Sprintf("pages of %+v", filter), all, auditModel(recs, filter))
		}
	})

	t.Run("MaxQueryLimit", func(t *testing.T) {
		if testing.Short() {
			t.Skip("appends more than MaxQueryLimit records")
		}
		l := open(t)
		recs := AuditRecords(base, 0, store.MaxQueryLimit+50)
		for b := range slices.Chunk(recs, 2000) {
			must(t, "AppendAudit", l.AppendAudit(ctx(t), b))
		}
		got, err := l.QueryAudit(ctx(t), store.AuditQuery{Limit: 1 << 30})
		must(t, "QueryAudit", err)
		if len(got) != store.MaxQueryLimit {
			t.Fatalf("QueryAudit with a huge limit = %d records, want MaxQueryLimit (%d)", len(got), store.MaxQueryLimit)
		}
		if got[0].ID != recs[len(recs)-1].ID {
			t.Errorf("first record %s, want the newest %s", got[0].ID, recs[len(recs)-1].ID)
		}
	})

	t.Run("Stats", func(t *testing.T) {
		l := open(t)
		recs := AuditRecords(base, 0, 300)
		must(t, "AppendAudit", l.AppendAudit(ctx(t), recs))
		for _, since := range []time.Time{{}, recs[200].Time, recs[299].Time.Add(time.Second)} {
			for _, tenant := range []string{"", "acme", "globex", "nobody"} {
				got, err := l.AuditStats(ctx(t), since, tenant)
				must(t, "AuditStats", err)
				if d := gocmp.Diff(statsModel(recs, since, tenant), got, cmpopts.EquateEmpty()); d != "" {
					t.Errorf("AuditStats(%v, %q) (-want +got):\n%s", since, tenant, d)
				}
			}
		}
	})

	t.Run("PruneByAge", func(t *testing.T) {
		l := open(t)
		recs := AuditRecords(base, 0, 100)
		must(t, "AppendAudit", l.AppendAudit(ctx(t), recs))
		n, err := l.PruneAudit(ctx(t), recs[30].Time, 0)
		must(t, "PruneAudit", err)
		if n != 30 {
			t.Errorf("PruneAudit deleted %d, want 30", n)
		}
		diffRecords(t, "after prune", queryAll(t, l), auditModel(recs[30:], store.AuditQuery{Limit: 1000}))
		n, err = l.PruneAudit(ctx(t), recs[30].Time, 0)
		must(t, "PruneAudit again", err)
		if n != 0 {
			t.Errorf("PruneAudit again deleted %d, want 0", n)
		}
	})

	t.Run("PruneBySize", func(t *testing.T) {
		l := open(t)
		recs := AuditRecords(base, 0, 100)
		must(t, "AppendAudit", l.AppendAudit(ctx(t), recs))
		n, err := l.PruneAudit(ctx(t), time.Time{}, 25)
		must(t, "PruneAudit", err)
		if n != 75 {
			t.Errorf("PruneAudit deleted %d, want 75", n)
		}
		diffRecords(t, "after prune", queryAll(t, l), auditModel(recs[75:], store.AuditQuery{Limit: 1000}))
		n, err = l.PruneAudit(ctx(t), time.Time{}, 25)
		must(t, "PruneAudit again", err)
		if n != 0 {
			t.Errorf("PruneAudit again deleted %d, want 0", n)
		}
	})

	t.Run("PruneByAgeAndSize", func(t *testing.T) {
		l := open(t)
		recs := AuditRecords(base, 0, 100)
		must(t, "AppendAudit", l.AppendAudit(ctx(t), recs))
		n, err := l.PruneAudit(ctx(t), recs[10].Time, 50)
		must(t, "PruneAudit", err)
		if n != 50 {
			t.Errorf("PruneAudit deleted %d, want 50", n)
		}
		diffRecords(t, "after prune", queryAll(t, l), auditModel(recs[50:], store.AuditQuery{Limit: 1000}))
	})

	t.Run("PruneNothing", func(t *testing.T) {
		l := open(t)
		recs := AuditRecords(base, 0, 20)
		must(t, "AppendAudit", l.AppendAudit(ctx(t), recs))
		for _, maxRows := range []int64{0, -1, 20, 1000} {
			n, err := l.PruneAudit(ctx(t), time.Time{}, maxRows)
			must(t, "PruneAudit", err)
			if n != 0 {
				t.Errorf("PruneAudit(zero, %d) deleted %d, want 0", maxRows, n)
			}
		}
		if got := queryAll(t, l); len(got) != 20 {
			t.Errorf("%d records left, want 20", len(got))
		}
	})

	t.Run("Canceled", func(t *testing.T) {
		l := open(t)
		c, cancel := context.WithCancel(ctx(t))
		cancel()
		wantErr(t, "AppendAudit", l.AppendAudit(c, AuditRecords(base, 0, 5)), context.Canceled)
		_, err := l.QueryAudit(c, store.AuditQuery{})
		wantErr(t, "QueryAudit", err, context.Canceled)
		if got := queryAll(t, l); len(got) != 0 {
			t.Errorf("a canceled append stored %d records", len(got))
		}
	})

	t.Run("ConcurrentAppendsFromTwoHandles", func(t *testing.T) {
		handles := []store.AuditLog{open(t), open(t)}
		const writers, batches, size = 6, 5, 40
		recs := AuditRecords(base, 0, writers*batches*size)
		var wg sync.WaitGroup
		errs := make(chan error, 2*writers*batches)
		for w := range writers {
			for _, retry := range []bool{false, true} { // each batch twice, on both handles
				wg.Go(func() {
					l := handles[w%2]
					if retry {
						l = handles[(w+1)%2]
					}
					for b := range batches {
						off := (w*batches + b) * size
						if err := l.AppendAudit(ctx(t), recs[off:off+size]); err != nil {
							errs <- err
						}
					}
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("AppendAudit: %v", err)
		}
		for i, l := range handles {
			diffRecords(t, fmt.Sprintf("handle %d", i), queryAll(t, l), auditModel(recs, store.AuditQuery{Limit: store.MaxQueryLimit}))
		}
	})
}
