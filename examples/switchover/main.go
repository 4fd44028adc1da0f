// Command switchover plays a real RDS/Aurora blue/green switchover on this
// machine and runs the same workload through a plain pgxpool and through a
// holdfast pool, side by side.
//
// It starts two real PostgreSQL servers (blue on 127.0.0.11, green on
// 127.0.0.21, same port, TLS with sslmode=verify-full), keeps green in sync
// with blue by logical replication, publishes the Aurora blue/green
// metadata on both, and resolves the RDS-shaped names through a fake DNS
// with a client-side TTL cache (package fakes/bluegreentest). Where those
// two addresses cannot be bound (macOS without loopback aliases), both
// servers listen on 127.0.0.1 at two ports and the simulator's dialer still
// presents them to the clients as 127.0.0.11 and 127.0.0.21; the command
// says which mode it uses. N workers per
// pool run short read-write transactions (insert a row with a unique id,
// read it back, commit) while the switchover is played: blue stops taking
// writes and its sessions are terminated (57P01), new connections to it are
// refused (53300), green catches up and is promoted, the names swap, and
// old blue stays up read-only (25006 for writes that reach it).
//
// It prints a progress line per second, the holdfast timeline summary and a
// table per client: requests, failed requests by SQLSTATE or error class,
// the longest pause a request saw, p50/p99 latency during the switchover,
// acknowledged writes missing on the new primary (lost) and writes that
// landed on the server that is not the primary (misplaced), the requests
// that succeeded after SWITCHOVER_COMPLETED, and a legend.
// With -json it prints the same result as one JSON object. With -svg FILE
// it also draws the run into FILE (package examples/timeline): the
// requests that finished in each 100 ms per client, ok and failed apart,
// the switchover's phases shaded, each client's longest pause marked.
//
// The holdfast client is holdfast.New(holdfast.WithBlueGreen(bluegreen.Config{}))
// with every default (with -failover, and holdfast.WithFailover(failover.Config{})),
// and runs each transaction with the factory's runner, Factory.RunTx
// (sqldb.RunTx for -sql), which re-runs it only when nothing
// committed: its INSERT is a plain INSERT, so a transaction applied twice
// would fail with 23505 and show in the table. The plain client is pgxpool
// with the same config and the retry loop an application writes by hand:
// a retry.Retrier classified by classify.Classify around each transaction,
// made idempotent with INSERT … ON CONFLICT DO NOTHING.
//
// Two scenarios add what RDS checks at the front door:
//
//   - -scenario iam: the servers take only RDS IAM tokens signed for a name
//     they answer to at that moment (green answers to its green names until
//     it takes the blue names). Both clients authenticate with tokens of
//     package rdsiam: the plain pool signs for the name in its connection
//     string, the holdfast pool uses rdsiam.With, which signs for the server
//     the connection reaches (the green name in POST until the rename, for
//     the green monitor too).
//   - -scenario node-certs: each server presents a certificate for its own
//     names, and a switchover renews them 2 s after COMPLETED; until then a
//     blue name verified against green fails sslmode=verify-full. holdfast
//     accepts green's certificate for the green counterpart of the blue name
//     it routed there (see package bluegreen, "Names").
//
// Run it with: go run ./examples/switchover
// Other scenarios: -scenario rollback | dns-before-post | stuck | slow-dns |
// frozen-blue | frozen-blue-post | iam | node-certs.
// -endpoint instance -cluster-only connects the pools to the writer
// instance's endpoint while the metadata names only the cluster endpoints:
// holdfast routes it from the topology (aurora_replica_status()).
// -failover adds writer-failover routing to the holdfast pool
// (holdfast.WithFailover(failover.Config{}), with the instance endpoints
// derived from the RDS-shaped names), as a service on Aurora configures
// both: its failover monitor reads the simulator's aurora_replica_status()
// and aurora_db_instance_identifier(), and must stand down while the
// switchover routes the pool.
package main

import (
	"context"
	"io"
	"slices"
	"time"

	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/fakes/bluegreentest"
)

// options are the command's flags.
type options struct {
	harness.Common // Name: the deployment's
	Scenario       bluegreentest.Scenario
	Timings        bluegreentest.Timings
	Warmup         time.Duration // workload before the switchover starts
	Settle         time.Duration // workload after the script ends
	Duration       time.Duration // minimum workload time (0: warmup + script + settle)
	SQL            bool          // a third client: database/sql (package sqldb) over a holdfast pool
	Engine         bluegreentest.Engine
	// Endpoint is the host the pools connect to: "cluster" (Aurora's
	// cluster endpoint, the default) or "instance" (the writer instance's
	// endpoint; RDS has only that).
	Endpoint string
	// ClusterOnly makes the metadata list only the cluster endpoints
	// (Aurora): holdfast learns the instances from aurora_replica_status().
	ClusterOnly bool
	// SignConfigured makes the holdfast client, on an Env with IAM, sign
	// every token for the name in its connection string
	// (holdfast.WithPasswordFunc(rdsiam.PasswordFunc(...))), as before
	// holdfast knew better: the control of the iam scenario.
	SignConfigured bool
	// Failover adds writer-failover routing to the holdfast pool
	// (holdfast.WithFailover(failover.Config{})), next to the blue/green
	// routing.
	Failover bool
	// SVG is a file to draw the run into (package examples/timeline); ""
	// for none.
	SVG string
}

func defaultOptions() options {
	return options{
		Common:   harness.Common{Workers: 4, Think: 10 * time.Millisecond, DNSTTL: time.Second, Name: "orders"},
		Scenario: bluegreentest.ScenarioNormal,
		Warmup:   2 * time.Second,
		Settle:   2 * time.Second,
		Engine:   bluegreentest.Aurora,
		Endpoint: "cluster",
	}
}

// flags defines the command's flags into o and returns what checks them
// once parsed (package harness prints usage and errors).
func (o *options) flags(fs *harness.FlagSet) (check func() error) {
	fs.Common(&o.Common, "concurrent workers per pool", "pause between a worker's requests")
	scenario := fs.String("scenario", string(o.Scenario), "normal | rollback | dns-before-post | stuck | slow-dns | frozen-blue | frozen-blue-post | iam (RDS IAM tokens checked by host) | node-certs (per-node certificates, renewed after COMPLETED)")
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "workload before the switchover starts")
	fs.DurationVar(&o.Settle, "settle", o.Settle, "workload after the switchover script ends")
	fs.DurationVar(&o.Duration, "duration", 0, "minimum workload duration (0: warmup + switchover + settle)")
	fs.DurationVar(&o.Timings.Preparation, "preparation", 0, "SWITCHOVER_INITIATED duration (default 3s)")
	fs.DurationVar(&o.Timings.InProgress, "in-progress", 0, "SWITCHOVER_IN_PROGRESS duration (default 2s)")
	fs.DurationVar(&o.Timings.BlueDNS, "blue-dns", 0, "blue DNS update after POST (default 3s; slow-dns 20s)")
	fs.DurationVar(&o.Timings.Completed, "completed", 0, "SWITCHOVER_COMPLETED after POST (default 4s)")
	engine := fs.String("engine", "aurora", "aurora (cluster endpoint, Aurora metadata) | rds (instance endpoint, rds_tools metadata)")
	fs.StringVar(&o.Endpoint, "endpoint", o.Endpoint, "cluster | instance: the endpoint the pools connect to (Aurora)")
	fs.BoolVar(&o.ClusterOnly, "cluster-only", false, "the metadata lists only the cluster endpoints (Aurora): instances come from aurora_replica_status()")
	fs.SQL(&o.SQL)
	fs.BoolVar(&o.Failover, "failover", false, "the holdfast pool also gets writer-failover routing (holdfast.WithFailover(failover.Config{}))")
	fs.SVG(&o.SVG, "draw the run into this SVG `file`: requests per 100 ms per client, ok and failed, the phases, each client's longest pause")
	return func() error {
		o.Scenario = bluegreentest.Scenario(*scenario)
		switch *engine {
		case "aurora":
			o.Engine = bluegreentest.Aurora
		case "rds":
			o.Engine = bluegreentest.RDS
		default:
			return fs.Fail("unknown -engine %q", *engine)
		}
		if !slices.Contains(bluegreentest.Scenarios(), o.Scenario) {
			return fs.Fail("unknown -scenario %q", *scenario)
		}
		if o.Endpoint != "cluster" && o.Endpoint != "instance" {
			return fs.Fail("unknown -endpoint %q", o.Endpoint)
		}
		return fs.CheckWorkers(o.Common)
	}
}

// command is the command: its flags, its run, its table.
var command = harness.Command[options, *Result]{Name: "switchover", Defaults: defaultOptions, Flags: (*options).flags, Print: (*Result).print,
	Run: func(ctx context.Context, o options, progress io.Writer) (*Result, error) {
		return run(ctx, nil, o, progress)
	},
}

func main() { command.Exit() }
