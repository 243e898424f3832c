package gate

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/store"
)

func TestCheckTokens(t *testing.T) {
	admin, approver := store.HashToken("alk_admin"), store.HashToken("alk_approver")
	if err := CheckAdminToken([]string{approver, admin}, "alk_admin"); err != nil {
		t.Errorf("admin token refused: %v", err)
	}
	for _, tok := range []string{"", "alk_approver", "alk_other"} {
		if err := CheckAdminToken([]string{admin}, tok); airlock.CodeOf(err) != airlock.CodeDenied {
			t.Errorf("CheckAdminToken(%q) = %v, want denied", tok, err)
		}
	}
	name, err := CheckApproverToken([]string{admin, approver}, "alk_approver")
	if err != nil || name != "approver "+approver[:len("sha256:")+MinTokenIDDigits] {
		t.Errorf("CheckApproverToken = %q, %v", name, err)
	}
	for _, tok := range []string{"", "alk_admin"} {
		if _, err := CheckApproverToken([]string{approver}, tok); airlock.ReasonOf(err) != airlock.ReasonApproverToken {
			t.Errorf("CheckApproverToken(%q) = %v, want approver_token", tok, err)
		}
	}
}

func TestFindToken(t *testing.T) {
	a, b := store.HashToken("alk_a"), store.HashToken("alk_b")
	list := func(context.Context, string) ([]store.Token, error) {
		return []store.Token{{Hash: a, Tenant: "t", Created: time.Unix(1, 0)}, {Hash: b, Tenant: "u"}}, nil
	}
	for _, id := range []string{a, strings.ToUpper(a[len("sha256:"):][:MinTokenIDDigits]), "alk_a", " " + a[:len("sha256:")+MinTokenIDDigits] + " "} {
		if got, err := FindToken(context.Background(), list, id); err != nil || got.Hash != a {
			t.Errorf("FindToken(%q) = %v, %v; want %s", id, got.Hash, err, a)
		}
	}
	if _, err := FindToken(context.Background(), list, a[:len("sha256:")+MinTokenIDDigits-1]); airlock.CodeOf(err) != airlock.CodeInvalid {
		t.Errorf("short prefix: %v, want invalid", err)
	}
	if _, err := FindToken(context.Background(), list, "alk_c"); airlock.CodeOf(err) != airlock.CodeNotFound || strings.Contains(err.Error(), "alk_c") {
		t.Errorf("unknown token: %v, want not_found without the token", err)
	}
	same := func(context.Context, string) ([]store.Token, error) {
		return []store.Token{{Hash: a}, {Hash: a[:len(a)-1] + "x"}}, nil
	}
	if _, err := FindToken(context.Background(), same, a[:len("sha256:")+MinTokenIDDigits]); airlock.CodeOf(err) != airlock.CodeInvalid {
		t.Errorf("ambiguous prefix: %v, want invalid", err)
	}
}
