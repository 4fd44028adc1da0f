module github.com/holdfast-db/holdfast/lb

go 1.26.0

// lb imports the root module's vendor-neutral internal/drain (and its
// tests fakes/pgtest). In this repository the workspace (../go.work)
// serves the root module; a release of lb requires a release of it.
require (
	github.com/holdfast-db/holdfast v0.0.0-00010101000000-000000000000
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
