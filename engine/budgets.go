package engine

import (
	"context"

	"github.com/airlockhq/airlock/internal/gate"
)

// extractBudget is the process's extraction budget in the shape
// internal/extract asks for: input bytes × the factor.
type extractBudget struct {
	b      *gate.Budgets
	factor int64
}

func (x extractBudget) Acquire(ctx context.Context, n int64) (func(), error) {
	return x.b.Acquire(ctx, gate.BudgetExtract, "", n*x.factor)
}
