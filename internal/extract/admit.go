package extract

import "context"

// Admit takes for a reading of n input bytes that does not go through
// Extract (the crawler's tokenizer pass over an ExtractNone page) what
// Extract takes before it runs: room in ctx's Budget (WithBudget), when
// ctx carries one, and one of the GOMAXPROCS turns extractions share. It
// waits for a turn until ctx is done, and returns ctx's error then (code
// timeout for airlock.CodeOf), or the Budget's error when it refuses. The
// caller runs its reading, then calls release once; it must release
// before it calls Extract, which takes its own turn.
func Admit(ctx context.Context, n int) (release func(), err error) {
	return admit(ctx, int64(n))
}

// admit takes room in ctx's Budget, then a turn of the pool: what Extract
// and Admit take before they read.
func admit(ctx context.Context, n int64) (func(), error) {
	unbudget := func() {}
	if b, ok := ctx.Value(budgetKey{}).(Budget); ok {
		r, err := b.Acquire(ctx, n)
		if err != nil {
			return nil, err
		}
		unbudget = r
	}
	select {
	case pool <- struct{}{}:
	case <-ctx.Done():
		unbudget()
		return nil, ctx.Err()
	}
	if err := ctx.Err(); err != nil {
		<-pool
		unbudget()
		return nil, err
	}
	released := false
	return func() {
		if released {
			return
		}
		released = true
		<-pool
		unbudget()
	}, nil
}
