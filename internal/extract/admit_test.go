package extract

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestAdmitTakesTurn: Admit holds one of the extractions' turns until
// its release, so a reading admitted while every turn is taken waits
// (here until its context ends), as Extract does; and it asks the
// context's Budget for the input's size.
func TestAdmitTakesTurn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard
	defer cancel()
	var releases []func()
	for range cap(pool) {
		r, err := Admit(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, r)
	}
	short, cancelShort := context.WithCancel(ctx)
	cancelShort()
	if _, err := Admit(short, 10); !errors.Is(err, context.Canceled) {
		t.Errorf("Admit with every turn taken: %v, want context.Canceled", err)
	}
	for _, r := range releases {
		r()
		r() // a second release gives nothing back twice
	}
	if len(pool) != 0 {
		t.Errorf("%d turns still taken after release", len(pool))
	}

	var asked int64
	refused := errors.New("no room")
	b := budgetFunc(func(_ context.Context, n int64) (func(), error) { asked = n; return nil, refused })
	if _, err := Admit(WithBudget(ctx, b), 1234); !errors.Is(err, refused) || asked != 1234 {
		t.Errorf("Admit with a refusing budget: %v (asked %d), want its error for 1234 bytes", err, asked)
	}
}

type budgetFunc func(context.Context, int64) (func(), error)

func (f budgetFunc) Acquire(ctx context.Context, n int64) (func(), error) { return f(ctx, n) }
