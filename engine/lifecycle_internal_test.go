package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// The closer stack runs last pushed first, runs every step even when one
// fails, joins their errors under the steps' names, and runs once.
func TestClosersUnwindInReverse(t *testing.T) {
	var s closers
	var ran []string
	step := func(name string, err error) {
		s.push(name, func(context.Context) error { ran = append(ran, name); return err })
	}
	step("store", errors.New("disk gone"))
	step("audit log", nil)
	step("loops", errors.New("stuck"))
	err := s.unwind(context.Background())
	if want := []string{"loops", "audit log", "store"}; !slices.Equal(ran, want) {
		t.Errorf("ran %v, want %v", ran, want)
	}
	if err == nil || !strings.Contains(err.Error(), "close store: disk gone") || !strings.Contains(err.Error(), "close loops: stuck") {
		t.Errorf("unwind = %v, want both failures by name", err)
	}
	ran = nil
	if err := s.unwind(context.Background()); err != nil || len(ran) != 0 {
		t.Errorf("second unwind ran %v, %v; want nothing", ran, err)
	}
}
