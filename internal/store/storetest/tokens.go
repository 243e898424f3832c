package storetest

import (
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/airlockhq/airlock/internal/store"
)

// RunTokens runs the conformance suite of store.Tokens.
func RunTokens(t *testing.T, open func(t *testing.T) store.Tokens) {
	tok := func(plain, tenant string, created time.Time) store.Token {
		return store.Token{Hash: store.HashToken(plain), Tenant: tenant, Label: "label of " + plain, Created: created}
	}

	t.Run("AddLookupDelete", func(t *testing.T) {
		s := open(t)
		want := tok("alpha", "acme", base.In(time.FixedZone("Y", -7*3600)))
		must(t, "AddToken", s.AddToken(ctx(t), want))
		got, err := s.LookupToken(ctx(t), want.Hash)
		must(t, "LookupToken", err)
		if d := gocmp.Diff(want, got); d != "" {
			t.Errorf("LookupToken (-want +got):\n%s", d)
		}
		if got.Created.Location() != time.UTC {
			t.Errorf("Created location %v, want UTC", got.Created.Location())
		}
		must(t, "DeleteToken", s.DeleteToken(ctx(t), want.Hash))
		_, err = s.LookupToken(ctx(t), want.Hash)
		wantErr(t, "LookupToken after delete", err, store.ErrNotFound)
		wantErr(t, "DeleteToken again", s.DeleteToken(ctx(t), want.Hash), store.ErrNotFound)
	})

	t.Run("ZeroCreatedIsNow", func(t *testing.T) {
		s := open(t)
		before := time.Now()
		must(t, "AddToken", s.AddToken(ctx(t), tok("beta", "acme", time.Time{})))
		after := time.Now()
		got, err := s.LookupToken(ctx(t), store.HashToken("beta"))
		must(t, "LookupToken", err)
		if got.Created.Before(before.Add(-time.Second)) || got.Created.After(after.Add(time.Second)) {
			t.Errorf("Created %v, want between %v and %v", got.Created, before, after)
		}
	})

	t.Run("Unknown", func(t *testing.T) {
		s := open(t)
		_, err := s.LookupToken(ctx(t), store.HashToken("nope"))
		wantErr(t, "LookupToken", err, store.ErrNotFound)
		_, err = s.LookupToken(ctx(t), "nope")
		wantErr(t, "LookupToken of a non-hash", err, store.ErrNotFound)
		wantErr(t, "DeleteToken", s.DeleteToken(ctx(t), store.HashToken("nope")), store.ErrNotFound)
	})

	t.Run("Duplicate", func(t *testing.T) {
		s := open(t)
		must(t, "AddToken", s.AddToken(ctx(t), tok("gamma", "acme", base)))
		wantErr(t, "AddToken again", s.AddToken(ctx(t), tok("gamma", "globex", base)), store.ErrExists)
		got, err := s.LookupToken(ctx(t), store.HashToken("gamma"))
		must(t, "LookupToken", err)
		if got.Tenant != "acme" {
			t.Errorf("after a refused duplicate the tenant is %q, want acme", got.Tenant)
		}
	})

	t.Run("OnlyHashes", func(t *testing.T) {
		s := open(t)
		h := store.HashToken("delta")
		for name, bad := range map[string]store.Token{
			"plaintext":      {Hash: "al_live_0123456789abcdef", Tenant: "acme"},
			"no prefix":      {Hash: strings.TrimPrefix(h, "sha256:"), Tenant: "acme"},
			"other prefix":   {Hash: "sha512:" + strings.TrimPrefix(h, "sha256:"), Tenant: "acme"},
			"uppercase hex":  {Hash: "sha256:" + strings.ToUpper(strings.TrimPrefix(h, "sha256:")), Tenant: "acme"},
			"short":          {Hash: h[:len(h)-2], Tenant: "acme"},
			"not hex":        {Hash: h[:len(h)-1] + "g", Tenant: "acme"},
			"empty":          {Tenant: "acme"},
			"without tenant": {Hash: h},
		} {
			wantErr(t, "AddToken "+name, s.AddToken(ctx(t), bad), store.ErrInvalid)
		}
		list, err := s.ListTokens(ctx(t), "")
		must(t, "ListTokens", err)
		if len(list) != 0 {
			t.Errorf("refused tokens were stored: %v", list)
		}
	})

	t.Run("List", func(t *testing.T) {
		s := open(t)
		all := []store.Token{
			tok("t1", "acme", base),
			tok("t2", "globex", base.Add(time.Second)),
			tok("t3", "acme", base.Add(2*time.Second)),
			tok("t4", "acme", base.Add(2*time.Second)), // same time: ordered by hash
		}
		for _, i := range []int{2, 0, 3, 1} {
			must(t, "AddToken", s.AddToken(ctx(t), all[i]))
		}
		sameTime := []store.Token{all[2], all[3]}
		if sameTime[0].Hash > sameTime[1].Hash {
			sameTime[0], sameTime[1] = sameTime[1], sameTime[0]
		}
		for _, tc := range []struct {
			tenant string
			want   []store.Token
		}{
			{"", []store.Token{all[0], all[1], sameTime[0], sameTime[1]}},
			{"acme", []store.Token{all[0], sameTime[0], sameTime[1]}},
			{"globex", []store.Token{all[1]}},
			{"initech", nil},
		} {
			got, err := s.ListTokens(ctx(t), tc.tenant)
			must(t, "ListTokens", err)
			if d := gocmp.Diff(tc.want, got, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("ListTokens(%q) (-want +got):\n%s", tc.tenant, d)
			}
		}
	})

	t.Run("TwoHandles", func(t *testing.T) {
		a, b := open(t), open(t)
		want := tok("epsilon", "acme", base)
		must(t, "AddToken on a", a.AddToken(ctx(t), want))
		got, err := b.LookupToken(ctx(t), want.Hash)
		must(t, "LookupToken on b", err)
		if d := gocmp.Diff(want, got); d != "" {
			t.Errorf("LookupToken on b (-want +got):\n%s", d)
		}
		must(t, "DeleteToken on b", b.DeleteToken(ctx(t), want.Hash))
		_, err = a.LookupToken(ctx(t), want.Hash)
		wantErr(t, "LookupToken on a after delete on b", err, store.ErrNotFound)
	})
}
