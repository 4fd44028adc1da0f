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
	"github.com/holdfast-db/holdfast/retry"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

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
	plain.Retrier = &retry.Retrier{Policy: harness.RetryPolicy(6, o.RequestTimeout), Classify: classify.Classify}
	hfPool := pools.Holdfast
	mon := f.Failover(hfPool)
	if mon == nil {
		return nil, errors.New("holdfast installed no failover monitor on the pool")
	}
	hf.Pool, hf.F = hfPool, f
	// With -sql, database/sql over its own holdfast pool (same factory,
	// so the same failover monitor), its transactions through
	// sqldb.RunTx.
	sc.DB, sc.F = pools.DB, f
	if err := waitWriter(ctx, mon); err != nil {
		return nil, fmt.Errorf("holdfast's monitor did not learn the writer: %w", err)
	}

	// Readiness of the holdfast pool, as a service would serve it.
	checker, err := harness.StartReadiness(ctx, f, hfPool)
	if err != nil {
		return nil, err
	}
	defer checker.Close()
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
	stopAt, end, err := wl.Play(ctx, o.Warmup, o.Settle, func() (err error) {
		s := failovertest.Scenario{Kind: o.Scenario, Detect: o.Detect, DNSLag: o.DNSLag, HangFor: o.HangFor, Rejoin: true,
			OnEvent: func(e failovertest.Event) { lastEvent.Store(e.Name) }}
		fres, err = c.Failover(ctx, s)
		return err
	})
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
		if _, err := conn.Exec(ctx, fmt.Sprintf(harness.WriteDDL, tables[cl.Name])); err != nil {
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
