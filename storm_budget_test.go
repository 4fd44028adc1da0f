package holdfast_test

import (
	"testing"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/internal/storm"
)

// The storm simulation's "holdfast defaults" draw on the budget a factory
// has by default, so that its figures are the defaults'.
func TestStormUsesTheDefaultBudget(t *testing.T) {
	for _, name := range []string{storm.Holdfast, storm.NoHold} {
		if got := *storm.Named(name).Budget; got != holdfast.DefaultBudgetForTest {
			t.Errorf("storm %q budget %+v, the factory's default %+v", name, got, holdfast.DefaultBudgetForTest)
		}
	}
}
