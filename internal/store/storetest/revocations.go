package storetest

import (
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/airlockhq/airlock/internal/store"
)

// RunRevocations runs the conformance suite of store.Revocations.
func RunRevocations(t *testing.T, open func(t *testing.T) store.Revocations) {
	// subjects lists the set without creation times, which are checked
	// separately.
	subjects := func(t *testing.T, r store.Revocations) []store.Revocation {
		t.Helper()
		list, err := r.ListRevocations(ctx(t))
		must(t, "ListRevocations", err)
		for i := range list {
			list[i].Created = time.Time{}
		}
		return list
	}
	wantList := func(t *testing.T, r store.Revocations, want ...store.Revocation) {
		t.Helper()
		if d := gocmp.Diff(want, subjects(t, r), cmpopts.EquateEmpty()); d != "" {
			t.Errorf("ListRevocations (-want +got):\n%s", d)
		}
	}
	version := func(t *testing.T, r store.Revocations) uint64 {
		t.Helper()
		v, err := r.RevocationVersion(ctx(t))
		must(t, "RevocationVersion", err)
		return v
	}

	t.Run("Empty", func(t *testing.T) {
		r := open(t)
		wantList(t, r)
		if v1, v2 := version(t, r), version(t, r); v1 != v2 {
			t.Errorf("RevocationVersion changed without a change: %d then %d", v1, v2)
		}
	})

	t.Run("RevokeUnrevoke", func(t *testing.T) {
		r := open(t)
		before := time.Now()
		must(t, "Revoke", r.Revoke(ctx(t), "globex/mcp-1", "leaked token"))
		must(t, "Revoke", r.Revoke(ctx(t), "acme", "abuse"))
		must(t, "Revoke", r.Revoke(ctx(t), "acme/browser/7", ""))
		after := time.Now()
		wantList(t, r,
			store.Revocation{Subject: "acme", Reason: "abuse"},
			store.Revocation{Subject: "acme/browser/7"},
			store.Revocation{Subject: "globex/mcp-1", Reason: "leaked token"})

		list, err := r.ListRevocations(ctx(t))
		must(t, "ListRevocations", err)
		for _, rv := range list {
			// A second of slack for implementations storing coarser times.
			if rv.Created.Before(before.Add(-time.Second)) || rv.Created.After(after.Add(time.Second)) {
				t.Errorf("%s: Created %v, want between %v and %v", rv.Subject, rv.Created, before, after)
			}
			if rv.Created.Location() != time.UTC {
				t.Errorf("%s: Created location %v, want UTC", rv.Subject, rv.Created.Location())
			}
		}

		must(t, "Unrevoke", r.Unrevoke(ctx(t), "acme"))
		wantList(t, r,
			store.Revocation{Subject: "acme/browser/7"},
			store.Revocation{Subject: "globex/mcp-1", Reason: "leaked token"})
		wantErr(t, "Unrevoke again", r.Unrevoke(ctx(t), "acme"), store.ErrNotFound)
		wantErr(t, "Unrevoke unknown", r.Unrevoke(ctx(t), "initech"), store.ErrNotFound)
	})

	t.Run("RevokeAgainReplacesReason", func(t *testing.T) {
		r := open(t)
		must(t, "Revoke", r.Revoke(ctx(t), "acme", "first"))
		must(t, "Revoke again", r.Revoke(ctx(t), "acme", "second"))
		wantList(t, r, store.Revocation{Subject: "acme", Reason: "second"})
	})

	t.Run("InvalidSubject", func(t *testing.T) {
		r := open(t)
		for _, s := range []string{"", "/", "/inst", "acme/"} {
			wantErr(t, "Revoke("+s+")", r.Revoke(ctx(t), s, "x"), store.ErrInvalid)
			wantErr(t, "Unrevoke("+s+")", r.Unrevoke(ctx(t), s), store.ErrInvalid)
		}
		wantList(t, r)
	})

	t.Run("VersionChangesOnEveryChange", func(t *testing.T) {
		r := open(t)
		seen := map[uint64]string{version(t, r): "start"}
		step := func(what string, err error) {
			t.Helper()
			must(t, what, err)
			v := version(t, r)
			if prev, ok := seen[v]; ok {
				t.Errorf("after %s RevocationVersion = %d, as after %s", what, v, prev)
			}
			seen[v] = what
		}
		step("revoke acme", r.Revoke(ctx(t), "acme", "a"))
		step("revoke acme/i", r.Revoke(ctx(t), "acme/i", "b"))
		step("unrevoke acme/i", r.Unrevoke(ctx(t), "acme/i"))
		step("unrevoke acme", r.Unrevoke(ctx(t), "acme")) // back to the empty set: still a new version
		step("revoke acme again", r.Revoke(ctx(t), "acme", "a"))
	})

	t.Run("TwoHandles", func(t *testing.T) {
		a, b := open(t), open(t)
		va, vb := version(t, a), version(t, b)
		if va != vb {
			t.Errorf("two handles on one store report versions %d and %d", va, vb)
		}

		must(t, "Revoke on a", a.Revoke(ctx(t), "acme/mcp-1", "stop"))
		wantList(t, b, store.Revocation{Subject: "acme/mcp-1", Reason: "stop"})
		vb2 := version(t, b)
		if vb2 == vb {
			t.Errorf("b's version stayed %d after a revoked", vb)
		}
		if va2 := version(t, a); va2 != vb2 {
			t.Errorf("after the revoke, a's version is %d and b's %d", va2, vb2)
		}

		must(t, "Unrevoke on b", b.Unrevoke(ctx(t), "acme/mcp-1"))
		wantList(t, a)
		if va3 := version(t, a); va3 == vb2 || va3 == va {
			t.Errorf("a's version %d after b unrevoked: not new (saw %d and %d)", va3, va, vb2)
		}
		wantErr(t, "Unrevoke on a after b", a.Unrevoke(ctx(t), "acme/mcp-1"), store.ErrNotFound)
	})
}
