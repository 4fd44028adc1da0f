// Command failover plays an Aurora (or RDS Multi-AZ DB cluster) writer
// failover on this machine and runs the same write workload through a plain
// pgxpool and through a holdfast pool, side by side.
//
// It starts a simulated cluster (package fakes/failovertest): a writer and
// a replica, real PostgreSQL servers on 127.0.0.11 and 127.0.0.21 (or two
// ports of 127.0.0.1 where those cannot be bound), kept in step by physical
// synchronous replication, so that a write acknowledged by the writer
// survives its death, as Aurora's shared storage guarantees. The cluster's
// names are RDS's, in a fake DNS read through a client-side cache with a
// TTL. Both pools connect by the cluster (writer) endpoint, with the same
// config. N workers per pool run short write transactions (insert a row
// with a unique id, read it back with the address of the server that
// answered, commit), each request bounded. The plain client retries the
// whole transaction with the loop an application writes by hand (made
// idempotent with ON CONFLICT DO NOTHING); the holdfast clients run it
// with holdfast's transaction runner, with a plain INSERT: the runner
// re-runs only what did not commit, and a transaction applied twice would
// fail with 23505 and show in the table.
//
// After a short steady state the simulator plays the failover:
//
//   - crash: the writer dies (pg_ctl stop -m immediate): connections reset,
//     new ones refused.
//   - graceful: the writer shuts down cleanly: its sessions get 57P01.
//   - hang: the writer is frozen (SIGSTOP): its connections go silent and
//     new ones hang after the TCP handshake, until it is resumed and fenced
//     after -hang-for.
//   - failback: a graceful failover, then a second one back to the first
//     writer.
//
// In each, the replica is promoted -detect after the writer went down, the
// cluster endpoint moves to it -dns-lag later (clients see it up to their
// DNS cache's TTL later still), and the old writer comes back as a reader
// (a fresh standby of the new writer), where writes fail with 25006. The
// workload runs until that is done, plus -settle: a plain pool whose cached
// DNS answer still named the old writer when it came back connects there
// and keeps those connections, so its writes keep failing with 25006.
//
// The holdfast client is holdfast.New(holdfast.WithFailover(failover.Config{}))
// with every default, its transactions through Factory.RunTx. Its monitor notices the dead writer within
// about a second, holds new connections by the writer endpoint until the
// new writer is known, then sends them to it while the DNS lags, refuses
// connections that land on a reader, and cuts its connections to the old
// writer. The plain client is pgxpool with the same config and a
// retry.Retrier classified by classify.Classify. A readiness.Checker on the
// holdfast pool is sampled every 100 ms: it must answer warn (reason
// "failover"), never fail, while the cluster fails over.
//
// With -sql a third client, "database/sql", runs the same workload through
// a *sql.DB of package sqldb over its own holdfast pool from the same
// factory (the same failover monitor), its transactions through
// sqldb.RunTx. It writes its own table, is
// audited like the others, and is checked against holdfast's goals.
//
// It prints a progress line per second (elapsed time, the simulator's last
// event, holdfast's routing, requests that succeeded and failed per client
// in that second), the merged timeline (the simulator's steps and the
// holdfast monitor's events, in ms from the writer going down), and a
// table per client: requests, failed requests by SQLSTATE or error class,
// acknowledged writes, lost and misplaced writes, the longest pause in
// acknowledged writes, the time to resume writing after the promotion,
// the readiness values seen, the goals, and a legend that defines each
// figure. With -json it prints the same result as one JSON object (progress
// on stderr). With -svg FILE it also draws the run into FILE (package
// examples/timeline): the requests that finished in each 100 ms per client,
// ok and failed apart, the failover's phases and events, each client's
// longest pause.
//
// Run it with: go run ./examples/failover
// Other scenarios: -scenario graceful | hang | failback; -engine multi-az
// for an RDS Multi-AZ DB cluster's topology (rds_tools.show_topology());
// -sql adds the database/sql client.
package main

import (
	"slices"
	"time"

	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
)

// options are the command's flags.
type options struct {
	harness.Common // Name: the cluster's
	Scenario       failovertest.Kind
	Warmup         time.Duration // workload before the failover starts
	Settle         time.Duration // workload after the failover is done
	// Detect, DNSLag and HangFor are the simulator's timings
	// (failovertest.Scenario).
	Detect, DNSLag, HangFor time.Duration
	Engine                  failovertest.Engine
	RequestTimeout          time.Duration // bounds each request, retries included
	SQL                     bool          // a third client: database/sql (package sqldb) over a holdfast pool
	SVG                     string        // a file to draw the run into (package examples/timeline); "" for none
}

func defaultOptions() options {
	s := failovertest.DemoScenario(failovertest.Crash)
	return options{
		Common: harness.Common{Workers: 4, Think: 10 * time.Millisecond, DNSTTL: failovertest.DefaultTTL,
			Name: failovertest.DefaultName},
		Scenario:       failovertest.Crash,
		Warmup:         2 * time.Second,
		Settle:         5 * time.Second,
		Detect:         s.Detect,
		DNSLag:         s.DNSLag,
		HangFor:        s.HangFor,
		Engine:         failovertest.Aurora,
		RequestTimeout: 15 * time.Second,
	}
}

// flags defines the command's flags into o and returns what checks them
// once parsed (package harness prints usage and errors).
func (o *options) flags(fs *harness.FlagSet) (check func() error) {
	fs.Common(&o.Common, "concurrent workers per pool", "pause between a worker's requests")
	// The failover and its timings.
	scenario := fs.String("scenario", string(o.Scenario), "crash | graceful | hang | failback")
	fs.DurationVar(&o.Detect, "detect", o.Detect, "from the writer going down to the promotion of the replica")
	fs.DurationVar(&o.DNSLag, "dns-lag", o.DNSLag, "from the promotion to the cluster endpoint moving to the new writer")
	fs.DurationVar(&o.HangFor, "hang-for", o.HangFor, "hang: how long the old writer stays frozen before it is resumed and fenced")
	engine := fs.String("engine", string(o.Engine), "aurora (aurora_replica_status()) | multi-az (RDS Multi-AZ DB cluster: rds_tools.show_topology())")
	// The workload around it.
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "workload before the failover starts")
	fs.DurationVar(&o.Settle, "settle", o.Settle, "workload after the failover is done (the old writer back as a reader)")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout, "bound of each request, retries included")
	fs.SQL(&o.SQL)
	fs.SVG(&o.SVG, "draw the run into this SVG `file`: requests per 100 ms per client, ok and failed, the failover's events, each client's longest pause")
	return func() error {
		o.Scenario = failovertest.Kind(*scenario)
		if !slices.Contains(failovertest.Kinds(), o.Scenario) {
			return fs.Fail("unknown -scenario %q", *scenario)
		}
		o.Engine = failovertest.Engine(*engine)
		if o.Engine != failovertest.Aurora && o.Engine != failovertest.MultiAZ {
			return fs.Fail("unknown -engine %q", *engine)
		}
		if err := fs.Check(o.Common, "think", "warmup", "settle", "detect", "dns-lag", "hang-for", "dns-ttl"); err != nil {
			return err
		}
		return fs.Positive("request-timeout")
	}
}

// command is the command: its flags, its run, its table.
var command = harness.Command[options, *Result]{Name: "failover", Defaults: defaultOptions, Flags: (*options).flags, Run: run, Print: (*Result).print}

func main() { command.Exit() }
