module github.com/holdfast-db/holdfast

go 1.26.0

require (
	cloud.google.com/go/auth v0.24.1
	cloud.google.com/go/auth/oauth2adapt v0.3.0
	cloud.google.com/go/cloudsqlconn v1.26.0
	cloud.google.com/go/compute/metadata v0.10.0
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/googleapis/gax-go/v2 v2.27.0
	github.com/jackc/pgx/v5 v5.13.0
	go.uber.org/goleak v1.3.0
	golang.org/x/oauth2 v0.37.0
	google.golang.org/api v0.308.0
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261019180522-ce908d29299b // indirect
	google.golang.org/grpc v1.84.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
