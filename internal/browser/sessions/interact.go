package sessions

import (
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/browser"
	"github.com/airlockhq/airlock/internal/gate"
)

// ValidateActions checks each step of an interact sequence. Errors:
// invalid (browser_action), naming the step.
func ValidateActions(actions []browser.Action) error {
	for i, a := range actions {
		if err := a.Validate(); err != nil {
			return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBrowserAction, "actions[%d]: %v", i, err)
		}
	}
	return nil
}

// CheckActions checks an interact sequence against a tenant's ceilings:
// its length (limits.browser_actions), then each step's values. Errors:
// invalid (limit).
func CheckActions(l *gate.Limits, actions []browser.Action) error {
	if err := l.CheckValue(gate.LimitBrowserActions, "actions", int64(len(actions))); err != nil {
		return err
	}
	for i, a := range actions {
		if err := l.Check(a, ""); err != nil {
			return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonLimit, "actions[%d]: %w", i, err)
		}
	}
	return nil
}

// InteractTimeout bounds a whole interact sequence: its budget
// (browser.InteractBudget) and ten seconds more. The budget of a sequence
// longer than browser.MaxActions is not computed: CheckActions refuses it
// first.
func InteractTimeout(actions []browser.Action) time.Duration {
	budget := time.Duration(0)
	if len(actions) <= browser.MaxActions {
		budget = browser.InteractBudget(actions)
	}
	return budget + 10*time.Second
}
