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
// with every default, its transactions through Factory.BeginTxFunc. Its monitor notices the dead writer within
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
// sqldb.BeginTxFunc. It writes its own table, is
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
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/holdfast-db/holdfast/readiness"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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

// command is the command: its flags, its run, its table.
var command = harness.Command[options, *Result]{Name: "failover", Defaults: defaultOptions, Flags: (*options).flags, Run: run, Print: (*Result).print}

func main() { command.Exit() }

// flags defines the command's flags into o and returns what checks them
// once parsed (package harness prints usage and errors).
func (o *options) flags(fs *harness.FlagSet) (check func() error) {
	fs.Common(&o.Common, "concurrent workers per pool", "pause between a worker's requests")
	scenario := fs.String("scenario", string(o.Scenario), "crash | graceful | hang | failback")
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "workload before the failover starts")
	fs.DurationVar(&o.Settle, "settle", o.Settle, "workload after the failover is done (the old writer back as a reader)")
	fs.DurationVar(&o.Detect, "detect", o.Detect, "from the writer going down to the promotion of the replica")
	fs.DurationVar(&o.DNSLag, "dns-lag", o.DNSLag, "from the promotion to the cluster endpoint moving to the new writer")
	fs.DurationVar(&o.HangFor, "hang-for", o.HangFor, "hang: how long the old writer stays frozen before it is resumed and fenced")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout, "bound of each request, retries included")
	engine := fs.String("engine", string(o.Engine), "aurora (aurora_replica_status()) | multi-az (RDS Multi-AZ DB cluster: rds_tools.show_topology())")
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
		if err := fs.CheckWorkers(o.Common); err != nil {
			return err
		}
		if err := fs.NonNegative("think", "warmup", "settle", "detect", "dns-lag", "hang-for", "dns-ttl"); err != nil {
			return err
		}
		if o.RequestTimeout <= 0 {
			return fs.Fail("-request-timeout %v: must be positive", o.RequestTimeout)
		}
		return nil
	}
}

// requestPolicy is the retry around each transaction, the same for every
// client: a handful of attempts, each bounded by the default
// AttemptTimeout (3 s), within the request's bound.
func requestPolicy(timeout time.Duration) retry.Policy {
	p := retry.Default()
	p.MaxAttempts = 6
	p.InitialInterval = 50 * time.Millisecond
	p.MaxElapsed = timeout
	return p
}

// run starts a cluster, plays the failover under the workload and returns
// the measurements. progress receives the live lines.
func run(ctx context.Context, o options, progress io.Writer) (*Result, error) {
	if o.Workers < 1 {
		return nil, errors.New("-workers must be at least 1")
	}
	if !slices.Contains(failovertest.Kinds(), o.Scenario) {
		return nil, fmt.Errorf("unknown scenario %q", o.Scenario)
	}
	if o.Engine == "" {
		o.Engine = failovertest.Aurora
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = defaultOptions().RequestTimeout
	}
	fmt.Fprintf(progress, "starting cluster %q (engine %s): a writer and a replica (PostgreSQL, synchronous physical replication) ...\n", o.Name, o.Engine)
	c, err := failovertest.Start(ctx, failovertest.Config{Name: o.Name, TTL: o.ClusterTTL(), Engine: o.Engine})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	oldWriter := c.Writer()
	harness.ClusterMode(progress, c, "two addresses")

	// How each client runs its transactions: set below, with the pools.
	plain, hf, sc := &harness.Writer{}, &harness.Writer{}, &harness.Writer{}
	clients := []*harness.Client{newClient("pgxpool", plain), newClient("holdfast", hf)}
	if o.SQL {
		clients = append(clients, newClient("database/sql", sc))
	}
	if err := createTables(ctx, c, clients); err != nil {
		return nil, err
	}
	// The same config for both pools: the cluster endpoint through the
	// client-side DNS cache, one connection per worker and one for the
	// readiness checks.
	poolCfg := func() (*pgxpool.Config, error) {
		return c.PoolConfig(c.ClusterEndpoint, fmt.Sprintf("pool_max_conns=%d", o.Workers+1))
	}

	// The holdfast factory: failover routing with every default.
	logger := o.Logger(&slog.HandlerOptions{Level: slog.LevelDebug})
	f, err := holdfast.New(holdfast.WithFailover(failover.Config{Logger: logger}), holdfast.WithLogger(logger))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pools, err := harness.OpenPools(ctx, f, o.SQL, func(string) (*pgxpool.Config, error) { return poolCfg() })
	if err != nil {
		return nil, err
	}
	defer pools.Close()
	if err := pools.Plain.Ping(ctx); err != nil {
		return nil, err
	}
	// The same caller-side retry as the holdfast client (the transaction is
	// idempotent), classified by the built-in rules: the comparison is
	// about routing, not about who retries.
	plain.Acquire = pools.Plain.Acquire
	plain.Retrier = &retry.Retrier{Policy: requestPolicy(o.RequestTimeout), Classify: classify.Classify}
	hfPool := pools.Holdfast
	mon := f.Failover(hfPool)
	if mon == nil {
		return nil, errors.New("holdfast installed no failover monitor on the pool")
	}
	hf.Pool, hf.F = hfPool, f
	// With -sql, database/sql over its own holdfast pool (same factory,
	// so the same failover monitor), its transactions through
	// sqldb.BeginTxFunc.
	sc.DB, sc.F = pools.DB, f
	if err := waitWriter(ctx, mon); err != nil {
		return nil, fmt.Errorf("holdfast's monitor did not learn the writer: %w", err)
	}

	// Readiness of the holdfast pool, as a service would serve it.
	checker, err := readiness.New(hfPool, readiness.Config{Factory: f})
	if err != nil {
		return nil, err
	}
	defer checker.Close()
	if err := checker.Start(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "cluster endpoint %s, writer %s; DNS TTL %v; %d workers per pool; scenario %s (detect %v, DNS lag %v%s)\n",
		c.ClusterEndpoint, oldWriter, o.DNSTTL, o.Workers, o.Scenario, o.Detect, o.DNSLag, hangNote(o))
	if o.SQL {
		fmt.Fprintln(progress, "clients: pgxpool, holdfast, database/sql (package sqldb over a holdfast pool of the same factory)")
	}

	// The workload, the progress lines and the readiness samples.
	var lastEvent atomic.Value
	lastEvent.Store("steady")
	wl := harness.Start(clients, harness.Config{Workers: o.Workers, Think: o.Think, Timeout: o.RequestTimeout,
		ErrorKey: func(err error) string { return harness.WriteErrorKey(classifier, err) }})
	begin := wl.Begin
	wl.Progress(progress, func(b *strings.Builder, counts []harness.Count) {
		st := mon.Status()
		fmt.Fprintf(b, "  %-26s holdfast=%-13s", lastEvent.Load().(string), st.Routing)
		harness.WriteCounts(b, counts)
		fmt.Fprintf(b, " | writer %s, held %d", st.Writer, st.Held)
	})
	var rd readinessLog
	wl.Go(func(done <-chan struct{}) { rd.sample(checker, done) })

	// The failover, after the warmup.
	var fres failovertest.Result
	err = harness.Sleep(ctx, o.Warmup)
	if err == nil {
		s := failovertest.Scenario{Kind: o.Scenario, Detect: o.Detect, DNSLag: o.DNSLag, HangFor: o.HangFor, Rejoin: true,
			OnEvent: func(e failovertest.Event) { lastEvent.Store(e.Name) }}
		fres, err = c.Failover(ctx, s)
	}
	if err == nil {
		err = harness.Sleep(ctx, o.Settle)
	}
	stopAt := wl.Stop()
	end := time.Now()
	if err != nil {
		return nil, err
	}
	res := &Result{Scenario: o.Scenario, Workers: o.Workers, Engine: o.Engine, DetectMS: ms(o.Detect), DNSLagMS: ms(o.DNSLag),
		DNSTTLMS: ms(o.DNSTTL), OldWriter: oldWriter, NewWriter: c.Writer()}
	if o.Scenario == failovertest.Hang {
		res.HangForMS = ms(o.HangFor)
	}
	if err := measure(ctx, res, c, fres, begin, stopAt, clients); err != nil {
		return nil, err
	}
	res.readiness(&rd)
	res.monitor(mon)
	res.timeline(fres, mon, &rd)
	res.goals()
	if o.SVG != "" {
		if err := res.chart(begin, stopAt, end, fres, mon, clients).WriteFile(o.SVG); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "timeline drawn in %s\n", o.SVG)
	}
	return res, nil
}

func hangNote(o options) string {
	if o.Scenario == failovertest.Hang {
		return fmt.Sprintf(", hang %v", o.HangFor)
	}
	return ""
}

// createTables creates the clients' tables on the writer.
func createTables(ctx context.Context, c *failovertest.Cluster, clients []*harness.Client) error {
	conn, err := pgx.Connect(ctx, c.DSN(c.Addr(c.Writer())))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, cl := range clients {
		if _, err := conn.Exec(ctx, fmt.Sprintf(ddl, tables[cl.Name])); err != nil {
			return err
		}
	}
	return nil
}

// waitWriter waits until the monitor knows the writer, or ctx ends, or 30 s
// pass.
func waitWriter(ctx context.Context, m failover.Monitor) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		changed := m.Changed()
		if m.Status().Writer != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}
