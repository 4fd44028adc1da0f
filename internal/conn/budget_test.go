package conn

import (
	"context"
	"testing"

	"github.com/holdfast-db/holdfast/internal/obs"
)

// A startup (the stage Start marks) and a context marked WithoutBudget
// are exempt from the retry budget; a request and a pool's growth are not.
func TestBudgetFree(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"request", ctx, false},
		{"pool growth", obs.WithStage(ctx, obs.StagePoolGrowth), false},
		{"startup", obs.WithStage(ctx, obs.StageStartup), true},
		{"WithoutBudget", WithoutBudget(ctx), true},
		{"derived from a WithoutBudget context", context.WithValue(WithoutBudget(ctx), otherKey{}, 1), true},
	} {
		if got := budgetFree(tc.ctx); got != tc.want {
			t.Errorf("%s: budgetFree = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// otherKey is a context key of the test's own.
type otherKey struct{}
