module github.com/holdfast-db/holdfast/lb

go 1.26.0

// lb does not depend on the root module (github.com/holdfast-db/holdfast):
// it has its own copy of the drain algorithm (internal/drain) and of the
// test PostgreSQL servers (internal/pgtest), so that
// go install github.com/holdfast-db/holdfast/lb/cmd/holdfast-lb@VERSION
// resolves lb alone. See RELEASING.md.
require (
	github.com/jackc/pgx/v5 v5.13.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
