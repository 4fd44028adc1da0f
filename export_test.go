package holdfast

import "github.com/jackc/pgx/v5/pgxpool"

// ReaderConfigForTest is the derivation of NewReadWrite's reader config,
// for the package's tests.
func (f *Factory) ReaderConfigForTest(writer *pgxpool.Config) (*pgxpool.Config, error) {
	return f.readerConfig(writer)
}

// DefaultBudgetForTest is the retry budget of a factory built without
// WithRetryBudget.
var DefaultBudgetForTest = defaultBudget
