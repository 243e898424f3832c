package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/airlockhq/airlock/internal/store"
)

// RunJobs runs the conformance suite of store.Jobs.
func RunJobs(t *testing.T, open func(t *testing.T) store.Jobs) {
	job := func(seq uint64, tenant, owner string) store.Job {
		created := base.Add(time.Duration(seq) * time.Second)
		return store.Job{
			ID: ULID(created, seq), Tenant: tenant, Owner: owner, State: "running",
			Request:  []byte(`{"seed":"https://example.com/"}`),
			Progress: []byte(`{"done":0}`),
			Created:  created, Updated: created, Lease: created.Add(time.Minute),
		}
	}
	get := func(t *testing.T, s store.Jobs, id string) store.Job {
		t.Helper()
		j, err := s.GetJob(ctx(t), id)
		must(t, "GetJob", err)
		return j
	}
	wantJob := func(t *testing.T, s store.Jobs, want store.Job) {
		t.Helper()
		got := get(t, s, want.ID)
		if d := gocmp.Diff(want, got); d != "" {
			t.Errorf("GetJob (-want +got):\n%s", d)
		}
		for _, tm := range []time.Time{got.Created, got.Updated, got.Finished, got.Lease} {
			if !tm.IsZero() && tm.Location() != time.UTC {
				t.Errorf("time %v not in UTC", tm)
			}
		}
	}
	seqs := func(pages []store.JobPage) []int {
		var out []int
		for _, p := range pages {
			out = append(out, p.Seq)
		}
		return out
	}
	page := func(seq int) []byte { return fmt.Appendf(nil, `{"url":"https://example.com/%d"}`, seq) }

	t.Run("CreateGet", func(t *testing.T) {
		s := open(t)
		j := job(1, "acme", "engine-1")
		j.Created = j.Created.In(time.FixedZone("Y", -7*3600))
		must(t, "CreateJob", s.CreateJob(ctx(t), j))
		j.Created = j.Created.UTC()
		wantJob(t, s, j)
		wantErr(t, "CreateJob again", s.CreateJob(ctx(t), j), store.ErrExists)
		_, err := s.GetJob(ctx(t), ULID(base, 999))
		wantErr(t, "GetJob unknown", err, store.ErrNotFound)

		// A zero Updated is Created.
		k := job(2, "acme", "engine-1")
		k.Updated = time.Time{}
		must(t, "CreateJob", s.CreateJob(ctx(t), k))
		if got := get(t, s, k.ID); !got.Updated.Equal(k.Created) {
			t.Errorf("Updated = %v, want Created %v", got.Updated, k.Created)
		}
	})

	t.Run("CreateInvalid", func(t *testing.T) {
		s := open(t)
		for name, mod := range map[string]func(*store.Job){
			"no ID":             func(j *store.Job) { j.ID = "" },
			"no tenant":         func(j *store.Job) { j.Tenant = "" },
			"no state":          func(j *store.Job) { j.State = "" },
			"no created":        func(j *store.Job) { j.Created = time.Time{} },
			"unfinished, owner": func(j *store.Job) { j.Owner = "" },
			"with pages":        func(j *store.Job) { j.Pages = 3 },
		} {
			j := job(1, "acme", "engine-1")
			mod(&j)
			wantErr(t, "CreateJob "+name, s.CreateJob(ctx(t), j), store.ErrInvalid)
		}
		list, err := s.ListJobs(ctx(t), "acme", 0)
		must(t, "ListJobs", err)
		if len(list) != 0 {
			t.Errorf("invalid jobs were stored: %v", list)
		}
	})

	t.Run("Update", func(t *testing.T) {
		s := open(t)
		j := job(1, "acme", "engine-1")
		must(t, "CreateJob", s.CreateJob(ctx(t), j))

		// The runner's progress write.
		j.Progress = []byte(`{"done":5}`)
		j.Updated = j.Created.Add(time.Second)
		j.Lease = j.Created.Add(2 * time.Minute)
		must(t, "UpdateJob", s.UpdateJob(ctx(t), j))
		wantJob(t, s, j)

		// Another owner, an unknown job, a job without owner.
		other := j
		other.Owner, other.State = "engine-2", "done"
		wantErr(t, "UpdateJob by another owner", s.UpdateJob(ctx(t), other), store.ErrConflict)
		unknown := j
		unknown.ID = ULID(base, 999)
		wantErr(t, "UpdateJob unknown", s.UpdateJob(ctx(t), unknown), store.ErrNotFound)
		noOwner := j
		noOwner.Owner = ""
		wantErr(t, "UpdateJob without owner", s.UpdateJob(ctx(t), noOwner), store.ErrInvalid)
		wantJob(t, s, j)

		// Tenant, Request, Created and Pages are not the runner's to change.
		fin := j
		fin.Tenant, fin.Request, fin.Pages, fin.Created = "globex", []byte(`{}`), 7, base.Add(time.Hour)
		fin.State, fin.Summary, fin.Error = "failed", []byte(`{"pages":0}`), []byte(`{"code":"upstream"}`)
		fin.Updated = j.Created.Add(3 * time.Second)
		fin.Finished, fin.Lease = fin.Updated, time.Time{}
		must(t, "UpdateJob to finished", s.UpdateJob(ctx(t), fin))
		want := fin
		want.Tenant, want.Request, want.Pages, want.Created = j.Tenant, j.Request, j.Pages, j.Created
		want.Owner = ""
		wantJob(t, s, want)

		// A finished job never changes.
		again := fin
		again.State, again.Finished = "running", time.Time{}
		wantErr(t, "UpdateJob after finished", s.UpdateJob(ctx(t), again), store.ErrConflict)
		wantJob(t, s, want)
	})

	t.Run("Pages", func(t *testing.T) {
		s := open(t)
		j := job(1, "acme", "engine-1")
		must(t, "CreateJob", s.CreateJob(ctx(t), j))
		pages, err := s.JobPages(ctx(t), j.ID, 0, 0)
		must(t, "JobPages", err)
		if pages != nil {
			t.Errorf("JobPages of a job without pages = %v, want nil", pages)
		}
		before := time.Now()
		for seq := 1; seq <= 5; seq++ {
			must(t, "AppendJobPage", s.AppendJobPage(ctx(t), j.ID, seq, page(seq)))
		}
		got := get(t, s, j.ID)
		if got.Pages != 5 {
			t.Errorf("Pages = %d, want 5", got.Pages)
		}
		if got.Updated.Before(before.Add(-time.Second)) {
			t.Errorf("Updated %v not moved by AppendJobPage (appended after %v)", got.Updated, before)
		}
		wantErr(t, "AppendJobPage duplicate", s.AppendJobPage(ctx(t), j.ID, 5, page(5)), store.ErrConflict)
		wantErr(t, "AppendJobPage gap", s.AppendJobPage(ctx(t), j.ID, 7, page(7)), store.ErrConflict)
		wantErr(t, "AppendJobPage unknown", s.AppendJobPage(ctx(t), ULID(base, 999), 1, page(1)), store.ErrNotFound)
		wantErr(t, "AppendJobPage seq 0", s.AppendJobPage(ctx(t), j.ID, 0, page(0)), store.ErrInvalid)
		wantErr(t, "AppendJobPage empty", s.AppendJobPage(ctx(t), j.ID, 6, nil), store.ErrInvalid)

		pages, err = s.JobPages(ctx(t), j.ID, 0, 0)
		must(t, "JobPages", err)
		if d := gocmp.Diff([]int{1, 2, 3, 4, 5}, seqs(pages)); d != "" {
			t.Errorf("JobPages seqs (-want +got):\n%s", d)
		}
		for _, p := range pages {
			if string(p.Data) != string(page(p.Seq)) {
				t.Errorf("page %d = %s, want %s", p.Seq, p.Data, page(p.Seq))
			}
		}
		pages, err = s.JobPages(ctx(t), j.ID, 2, 2)
		must(t, "JobPages after 2, limit 2", err)
		if d := gocmp.Diff([]int{3, 4}, seqs(pages)); d != "" {
			t.Errorf("JobPages after 2 limit 2 (-want +got):\n%s", d)
		}
		pages, err = s.JobPages(ctx(t), j.ID, 5, 0)
		must(t, "JobPages after the last", err)
		if pages != nil {
			t.Errorf("JobPages after the last = %v, want nil", seqs(pages))
		}
		pages, err = s.JobPages(ctx(t), ULID(base, 999), 0, 0)
		must(t, "JobPages unknown", err)
		if pages != nil {
			t.Errorf("JobPages of an unknown job = %v, want nil", seqs(pages))
		}

		// A finished job takes no more pages.
		j.State, j.Finished = "done", base.Add(time.Hour)
		must(t, "UpdateJob", s.UpdateJob(ctx(t), j))
		wantErr(t, "AppendJobPage after finished", s.AppendJobPage(ctx(t), j.ID, 6, page(6)), store.ErrConflict)
		if got := get(t, s, j.ID); got.Pages != 5 {
			t.Errorf("Pages after finish = %d, want 5", got.Pages)
		}
	})

	t.Run("PageLimit", func(t *testing.T) {
		s := open(t)
		j := job(1, "acme", "engine-1")
		must(t, "CreateJob", s.CreateJob(ctx(t), j))
		for seq := 1; seq <= store.MaxJobLimit+1; seq++ {
			must(t, "AppendJobPage", s.AppendJobPage(ctx(t), j.ID, seq, page(seq)))
		}
		for _, tt := range []struct{ limit, want int }{{0, store.DefaultJobLimit}, {-1, store.DefaultJobLimit}, {7, 7}, {1 << 20, store.MaxJobLimit}} {
			pages, err := s.JobPages(ctx(t), j.ID, 0, tt.limit)
			must(t, "JobPages", err)
			if len(pages) != tt.want || pages[0].Seq != 1 {
				t.Errorf("JobPages limit %d: %d pages from %d, want %d from 1", tt.limit, len(pages), pages[0].Seq, tt.want)
			}
		}
	})

	t.Run("List", func(t *testing.T) {
		s := open(t)
		var acme []string
		for i := range 5 {
			tenant := "acme"
			if i%2 == 1 {
				tenant = "globex"
			}
			j := job(uint64(i+1), tenant, "engine-1")
			must(t, "CreateJob", s.CreateJob(ctx(t), j))
			if tenant == "acme" {
				acme = append(acme, j.ID)
			}
		}
		slices.Reverse(acme)
		ids := func(list []store.Job) []string {
			var out []string
			for _, j := range list {
				out = append(out, j.ID)
			}
			return out
		}
		list, err := s.ListJobs(ctx(t), "acme", 0)
		must(t, "ListJobs", err)
		if d := gocmp.Diff(acme, ids(list)); d != "" {
			t.Errorf("ListJobs acme, newest first (-want +got):\n%s", d)
		}
		list, err = s.ListJobs(ctx(t), "acme", 2)
		must(t, "ListJobs limit 2", err)
		if d := gocmp.Diff(acme[:2], ids(list)); d != "" {
			t.Errorf("ListJobs acme limit 2 (-want +got):\n%s", d)
		}
		list, err = s.ListJobs(ctx(t), "initech", 0)
		must(t, "ListJobs", err)
		if list != nil {
			t.Errorf("ListJobs of a tenant without jobs = %v, want nil", ids(list))
		}
		_, err = s.ListJobs(ctx(t), "", 0)
		wantErr(t, "ListJobs of no tenant", err, store.ErrInvalid)
	})

	t.Run("RenewExpire", func(t *testing.T) {
		s := open(t)
		live := job(1, "acme", "engine-live")
		dead := job(2, "acme", "engine-dead")
		dead2 := job(3, "globex", "engine-dead")
		done := job(4, "acme", "engine-dead")
		for _, j := range []store.Job{live, dead, dead2, done} {
			must(t, "CreateJob", s.CreateJob(ctx(t), j))
		}
		done.State, done.Finished, done.Lease = "done", base, time.Time{}
		must(t, "UpdateJob", s.UpdateJob(ctx(t), done))
		must(t, "AppendJobPage", s.AppendJobPage(ctx(t), dead.ID, 1, page(1)))

		// Every lease ends within base+1m+3s; the live runner renews.
		now := base.Add(time.Hour)
		n, err := s.RenewJobs(ctx(t), "engine-live", now.Add(30*time.Second))
		must(t, "RenewJobs", err)
		if n != 1 {
			t.Errorf("RenewJobs renewed %d jobs, want 1", n)
		}
		if n, err := s.RenewJobs(ctx(t), "engine-nobody", now); err != nil || n != 0 {
			t.Errorf("RenewJobs of an owner without jobs = %d, %v; want 0, nil", n, err)
		}
		_, err = s.RenewJobs(ctx(t), "", now)
		wantErr(t, "RenewJobs without owner", err, store.ErrInvalid)

		ids, err := s.ExpireJobs(ctx(t), now, "interrupted", now)
		must(t, "ExpireJobs", err)
		slices.Sort(ids)
		if d := gocmp.Diff([]string{dead.ID, dead2.ID}, ids); d != "" {
			t.Errorf("ExpireJobs (-want +got):\n%s", d)
		}
		want := dead
		want.State, want.Owner, want.Finished, want.Updated, want.Pages = "interrupted", "", now, now, 1
		wantJob(t, s, want)
		if got := get(t, s, live.ID); got.State != "running" || got.Owner != "engine-live" || !got.Finished.IsZero() {
			t.Errorf("the renewed job was expired: %+v", got)
		}
		if got := get(t, s, done.ID); got.State != "done" || !got.Finished.Equal(base) {
			t.Errorf("a finished job was expired: %+v", got)
		}
		// The dead runner, come back, cannot write over the verdict.
		dead.State = "done"
		wantErr(t, "UpdateJob by the expired owner", s.UpdateJob(ctx(t), dead), store.ErrConflict)
		wantErr(t, "AppendJobPage to an expired job", s.AppendJobPage(ctx(t), dead.ID, 2, page(2)), store.ErrConflict)

		ids, err = s.ExpireJobs(ctx(t), now, "interrupted", now)
		must(t, "ExpireJobs again", err)
		if ids != nil {
			t.Errorf("ExpireJobs again = %v, want nil", ids)
		}
		_, err = s.ExpireJobs(ctx(t), now, "", now)
		wantErr(t, "ExpireJobs without state", err, store.ErrInvalid)
	})

	t.Run("Prune", func(t *testing.T) {
		s := open(t)
		old, recent, running := job(1, "acme", "e"), job(2, "acme", "e"), job(3, "acme", "e")
		for _, j := range []store.Job{old, recent, running} {
			must(t, "CreateJob", s.CreateJob(ctx(t), j))
			for seq := 1; seq <= 3; seq++ {
				must(t, "AppendJobPage", s.AppendJobPage(ctx(t), j.ID, seq, page(seq)))
			}
		}
		old.State, old.Finished = "done", base.Add(time.Hour)
		recent.State, recent.Finished = "done", base.Add(3*time.Hour)
		must(t, "UpdateJob", s.UpdateJob(ctx(t), old))
		must(t, "UpdateJob", s.UpdateJob(ctx(t), recent))

		n, err := s.PruneJobs(ctx(t), base.Add(2*time.Hour))
		must(t, "PruneJobs", err)
		if n != 1 {
			t.Errorf("PruneJobs deleted %d jobs, want 1", n)
		}
		_, err = s.GetJob(ctx(t), old.ID)
		wantErr(t, "GetJob pruned", err, store.ErrNotFound)
		if pages, err := s.JobPages(ctx(t), old.ID, 0, 0); err != nil || pages != nil {
			t.Errorf("pages of a pruned job: %v, %v", seqs(pages), err)
		}
		for _, j := range []store.Job{recent, running} {
			if pages, err := s.JobPages(ctx(t), j.ID, 0, 0); err != nil || len(pages) != 3 {
				t.Errorf("pages of kept job %s: %v, %v", j.ID, seqs(pages), err)
			}
		}
		if n, err := s.PruneJobs(ctx(t), time.Time{}); err != nil || n != 0 {
			t.Errorf("PruneJobs(zero) = %d, %v; want 0, nil", n, err)
		}
	})

	t.Run("PruneMany", func(t *testing.T) {
		s := open(t)
		const n = 120 // more than one implementation chunk
		for i := range n {
			j := job(uint64(i+1), "acme", "e")
			must(t, "CreateJob", s.CreateJob(ctx(t), j))
			must(t, "AppendJobPage", s.AppendJobPage(ctx(t), j.ID, 1, page(1)))
			j.State, j.Finished = "done", base
			must(t, "UpdateJob", s.UpdateJob(ctx(t), j))
		}
		got, err := s.PruneJobs(ctx(t), base.Add(time.Second))
		must(t, "PruneJobs", err)
		if got != n {
			t.Errorf("PruneJobs deleted %d, want %d", got, n)
		}
		if list, _ := s.ListJobs(ctx(t), "acme", 0); list != nil {
			t.Errorf("%d jobs left", len(list))
		}
	})

	t.Run("TwoHandles", func(t *testing.T) {
		a, b := open(t), open(t)
		j := job(1, "acme", "engine-a")
		must(t, "CreateJob on a", a.CreateJob(ctx(t), j))
		must(t, "AppendJobPage on a", a.AppendJobPage(ctx(t), j.ID, 1, page(1)))
		if got := get(t, b, j.ID); got.Pages != 1 || got.Owner != "engine-a" {
			t.Errorf("b sees %+v", got)
		}
		pages, err := b.JobPages(ctx(t), j.ID, 0, 0)
		must(t, "JobPages on b", err)
		if len(pages) != 1 {
			t.Errorf("b sees %d pages, want 1", len(pages))
		}
		ids, err := b.ExpireJobs(ctx(t), j.Lease.Add(time.Second), "interrupted", time.Time{})
		must(t, "ExpireJobs on b", err)
		if len(ids) != 1 {
			t.Errorf("ExpireJobs on b = %v", ids)
		}
		got := get(t, a, j.ID)
		if got.State != "interrupted" || got.Finished.IsZero() {
			t.Errorf("a sees %+v after b expired it", got)
		}
	})
}
