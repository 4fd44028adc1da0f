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

// failoverConfig is the holdfast factory's failover configuration for g:
// every default, the demo's logger, and where each Region's instance
// endpoints are (its cluster endpoint): no server tells a secondary
// Region's, and without them holdfast routes nothing on the global writer
// endpoint.
func failoverConfig(g *failovertest.Global, logger *slog.Logger) failover.Config {
	regions := map[string]string{}
	for _, r := range g.Regions() {
		regions[r.Name] = r.ClusterEndpoint
	}
	return failover.Config{Logger: logger, Global: failover.GlobalConfig{Regions: regions}}
}

// run starts a global cluster, plays the operation under the workload and
// returns the measurements. progress receives the live lines.
func run(ctx context.Context, o options, progress io.Writer) (*Result, error) {
	if o.Workers < 1 {
		return nil, errors.New("-workers must be at least 1")
	}
	if !slices.Contains(ops, o.Op) {
		return nil, fmt.Errorf("unknown operation %q", o.Op)
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = defaultOptions().RequestTimeout
	}
	lag := o.Lag
	if lag == 0 {
		lag = -1 // failovertest: no delay (0 is its default)
	}
	fmt.Fprintf(progress, "starting global cluster %q: two Regions, a writer and a reader in the primary, two standbys in the secondary (PostgreSQL; the secondary %v behind) ...\n", o.Name, o.Lag)
	g, err := failovertest.StartGlobal(ctx, failovertest.GlobalConfig{Name: o.Name, Lag: lag, TTL: o.ClusterTTL(), TLS: o.TLS})
	if err != nil {
		return nil, err
	}
	defer g.Close()
	globalMode(progress, g)
	if err := createTable(ctx, g); err != nil {
		return nil, err
	}

	// The same config for both pools: the global writer endpoint through
	// the client-side DNS cache, one connection per worker and one more.
	poolCfg := func() (*pgxpool.Config, error) {
		return g.PoolConfig(g.GlobalEndpoint, fmt.Sprintf("pool_max_conns=%d", o.Workers+1), "connect_timeout=2")
	}
	logger := o.Logger(&slog.HandlerOptions{Level: slog.LevelDebug})
	f, err := holdfast.New(holdfast.WithFailover(failoverConfig(g, logger)), holdfast.WithLogger(logger))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pools, err := harness.OpenPools(ctx, f, false, func(string) (*pgxpool.Config, error) { return poolCfg() })
	if err != nil {
		return nil, err
	}
	defer pools.Close()
	for _, p := range []*pgxpool.Pool{pools.Plain, pools.Holdfast} {
		if err := p.Ping(ctx); err != nil {
			return nil, err
		}
	}
	plain := newClient("pgxpool", &harness.Writer{Acquire: pools.Plain.Acquire,
		Retrier: &retry.Retrier{Policy: harness.RetryPolicy(6, o.RequestTimeout), Classify: classify.Classify}})
	hf := newClient("holdfast", &harness.Writer{F: f, Pool: pools.Holdfast})
	clients := []*harness.Client{plain, hf}

	// holdfast's failover monitor on the global writer endpoint: none
	// when holdfast routes no failover there.
	mon := f.Failover(pools.Holdfast)
	routing := func() string { return "off" }
	if mon != nil {
		if err := waitWriter(ctx, mon); err != nil {
			return nil, fmt.Errorf("holdfast's monitor did not learn the writer: %w", err)
		}
		routing = func() string { return mon.Status().Routing }
	} else {
		fmt.Fprintln(progress, "holdfast: no failover monitor on the global writer endpoint (failover routing off: it behaves as plain pgxpool)")
	}
	fmt.Fprintf(progress, "global writer endpoint %s, writer %s in %s; DNS TTL %v; %d workers per pool; operation %s (%s)\n",
		g.GlobalEndpoint, g.Writer(), g.WriterRegion(), o.DNSTTL, o.Workers, o.Op, o.timings())

	// The workload and the progress lines.
	var lastEvent atomic.Value
	lastEvent.Store("steady")
	wl := harness.Start(clients, harness.Config{Workers: o.Workers, Think: o.Think, Timeout: o.RequestTimeout,
		ErrorKey: func(err error) string { return harness.WriteErrorKey(classifier, err) }})
	begin := wl.Begin
	wl.Progress(progress, func(b *strings.Builder, counts []harness.Count) {
		fmt.Fprintf(b, "  %-24s holdfast=%-13s", lastEvent.Load().(string), routing())
		harness.WriteCounts(b, counts)
		fmt.Fprintf(b, " | writer %s (%s)", g.Writer(), g.WriterRegion())
	})

	// The operation, after the warmup, the new primary watched from its
	// start.
	var gres failovertest.GlobalResult
	var watch *writableWatch
	stopAt, end, err := wl.Play(ctx, o.Warmup, o.Settle, func() (err error) {
		if watch, err = watchWritable(ctx, g.DSN(g.Addr(secondaryHead(g)))); err != nil {
			return err
		}
		s := failovertest.GlobalScenario{DNSLag: o.DNSLag, OnEvent: func(e failovertest.Event) { lastEvent.Store(e.Name) }}
		if o.Op == Failover {
			s.Detect, s.Audit = o.Detect, "public."+table
			gres, err = g.Failover(ctx, s)
		} else {
			gres, err = g.Switchover(ctx, s)
		}
		return err
	})
	var writable time.Time
	if watch != nil {
		writable = watch.stop()
	}
	if err != nil {
		return nil, err
	}
	var events []failover.Event
	if mon != nil {
		events = mon.Status().Events
	}
	res, err := measure(ctx, o, g, gres, writable, clients, begin, stopAt)
	if err != nil {
		return nil, err
	}
	res.monitor(mon)
	res.timeline(gres, events)
	res.goals()
	if o.SVG != "" {
		if err := res.chart(begin, stopAt, end, gres, events, clients).WriteFile(o.SVG); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "timeline drawn in %s\n", o.SVG)
	}
	return res, nil
}

// timings are the operation's timings, for the progress lines.
func (o options) timings() string {
	if o.Op == Failover {
		return fmt.Sprintf("lag %v, detect %v, DNS lag %v", o.Lag, o.Detect, o.DNSLag)
	}
	return fmt.Sprintf("lag %v, DNS lag %v", o.Lag, o.DNSLag)
}

// globalMode prints the Regions, their servers and how they are reached.
func globalMode(w io.Writer, g *failovertest.Global) {
	var parts []string
	for _, r := range g.Regions() {
		var servers []string
		for _, id := range r.Servers {
			servers = append(servers, id+" "+g.Addr(id))
		}
		parts = append(parts, r.Name+": "+strings.Join(servers, ", "))
	}
	mode := "an address each"
	if g.SingleIP {
		mode = "single address: the servers listen on 127.0.0.1, each on its own port"
	}
	fmt.Fprintf(w, "mode: %s (%s)\n", mode, strings.Join(parts, "; "))
}

// createTable creates the clients' table on the writer.
func createTable(ctx context.Context, g *failovertest.Global) error {
	conn, err := pgx.Connect(ctx, g.DSN(g.Addr(g.Writer())))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, ddl)
	return err
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

// secondaryHead is the server a global operation promotes: the secondary
// Region's first.
func secondaryHead(g *failovertest.Global) string {
	for _, r := range g.Regions() {
		if r.Name != g.WriterRegion() {
			return r.Servers[0]
		}
	}
	return ""
}

// writableWatch asks a server whether it takes writes, until it does.
type writableWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	at     time.Time
}

// watchWritable asks the server of dsn every 5 ms, on a connection of its
// own, whether it takes writes (pg_is_in_recovery() false), until it does
// or stop is called: the time the new primary accepts writes, measured
// apart from the simulator's stamp of its step (which comes once the
// simulator saw it too). ctx bounds it.
func watchWritable(ctx context.Context, dsn string) (*writableWatch, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.Connect(cctx, dsn)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("watching the secondary: %w", err)
	}
	ctx, cancel = context.WithCancel(ctx)
	w := &writableWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer func() { _ = conn.Close(context.Background()) }()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			sent := time.Now()
			var recovering bool
			err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering)
			if err == nil && !recovering {
				w.at = sent // it took writes by the time it answered
				return
			}
			if err != nil && conn.IsClosed() && ctx.Err() == nil {
				cctx, ccancel := context.WithTimeout(ctx, time.Second)
				if c, err := pgx.Connect(cctx, dsn); err == nil {
					conn = c
				}
				ccancel()
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return w, nil
}

// stop stops the watch and returns when the server first said it takes
// writes: the time that question was sent; zero if it never did.
func (w *writableWatch) stop() time.Time {
	w.cancel()
	<-w.done
	return w.at
}
