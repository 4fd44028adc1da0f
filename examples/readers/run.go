package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// run starts a cluster, plays the phases under the workload and returns
// the measurements. progress receives the live lines.
func run(ctx context.Context, o options, progress io.Writer) (*Result, error) {
	if o.Readers < 2 || o.Pool < 1 || o.Workers < 1 || o.Refresh <= 0 || o.RequestTimeout <= 0 || o.Sample <= 0 {
		return nil, fmt.Errorf("invalid options %+v", o)
	}
	// The phases' messages and the progress lines write at once.
	progress = harness.SyncWriter(progress)
	fmt.Fprintf(progress, "starting cluster %q (Aurora): a writer and %d readers (PostgreSQL, physical replication) ...\n", o.Name, o.Readers)
	c, err := failovertest.Start(ctx, failovertest.Config{Name: o.Name, Replicas: o.Readers, TTL: o.ClusterTTL(), Seed: o.Seed})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	harness.ClusterMode(progress, c, "an address per server")
	clients := []*client{newClient("pgxpool"), newClient("holdfast")}
	if err := createRoles(ctx, c, clients); err != nil {
		return nil, err
	}
	// The same config for both pools: the reader endpoint through the
	// client-side DNS cache (PoolConfig sets its LookupFunc), the client's
	// own role, every connection opened at the start.
	poolCfg := func(user string) (*pgxpool.Config, error) {
		cfg, err := c.PoolConfig(c.ReaderEndpoint)
		if err != nil {
			return nil, err
		}
		cfg.ConnConfig.User = user
		cfg.MinConns, cfg.MaxConns = int32(o.Pool), int32(o.Pool)
		return cfg, nil
	}

	logger := o.Logger(&slog.HandlerOptions{Level: slog.LevelDebug})
	f, err := holdfast.New(holdfast.WithFailover(failover.Config{
		Logger:          logger,
		RefreshInterval: o.Refresh,
		Readers:         failover.ReaderConfig{MaxLag: o.MaxLag},
	}), holdfast.WithLogger(logger))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pools, err := harness.OpenPools(ctx, f, false, poolCfg) // each under its client's role
	if err != nil {
		return nil, err
	}
	defer pools.Close()
	clients[0].pool, clients[1].pool = pools.Plain, pools.Holdfast
	hfPool := pools.Holdfast
	if f.Failover(hfPool) == nil {
		return nil, errors.New("holdfast installed no failover monitor on the pool")
	}
	// Both pools open their MinConns in the background: wait for them.
	for _, cl := range clients {
		if err := waitOpen(ctx, cl.pool, o.Pool); err != nil {
			return nil, fmt.Errorf("%s: %w", cl.Name, err)
		}
	}
	fmt.Fprintf(progress, "reader endpoint %s; DNS TTL %v; pools of %d (MinConns = MaxConns), %d workers each; "+
		"holdfast RefreshInterval %v (default 5 s with a reader pool), Readers.MaxLag %v\n",
		c.ReaderEndpoint, o.DNSTTL, o.Pool, o.Workers, o.Refresh, o.MaxLag)

	// The workload, the samples and the progress lines.
	var phase atomic.Value
	phase.Store("steady")
	smp := newSampler(c, clients)
	defer smp.close()
	wl := harness.Start([]*harness.Client{clients[0].Client, clients[1].Client},
		harness.Config{Workers: o.Workers, Think: o.Think, Timeout: o.RequestTimeout, ErrorKey: errorKey})
	defer wl.Stop()
	begin := wl.Begin
	wl.Go(func(done <-chan struct{}) { smp.run(ctx, &phase, o.Sample, done) })
	wl.Progress(progress, func(b *strings.Builder, counts []harness.Count) {
		fmt.Fprintf(b, "  %-6s", phase.Load().(string))
		s, _ := smp.last()
		for _, c := range counts {
			fmt.Fprintf(b, " | %-8s ok %4d fail %3d conns %s", c.Name, c.OK, c.Failed, perReader(s.Conns[c.Name]))
		}
	})

	res := &Result{Engine: failovertest.Aurora, ReadersAtStart: o.Readers, PoolSize: o.Pool, Workers: o.Workers,
		RefreshMS: ms(o.Refresh), MaxLagMS: ms(o.MaxLag), LagMS: ms(o.Lag), DNSTTLMS: ms(o.DNSTTL), JoinWaitMS: ms(o.JoinWait),
		LagCutoffAfterMS: ms(o.MaxLag + o.Refresh)}
	var phases []Phase
	mark := func(name string) {
		now := time.Now()
		if n := len(phases); n > 0 {
			phases[n-1].end = now
		}
		phases = append(phases, Phase{Name: name, start: now})
		phase.Store(name)
	}
	mark("steady")
	original := c.Readers()

	// Steady.
	if err := harness.Sleep(ctx, o.Steady); err != nil {
		return nil, err
	}

	// A reader joins.
	mark("add")
	fmt.Fprintf(progress, "adding a reader (pg_basebackup from the writer) ...\n")
	addStart := time.Now()
	added, err := c.AddReader(ctx)
	if err != nil {
		return nil, err
	}
	joined := time.Now()
	res.AddedReader, res.AddReaderTookMS = added, ms(joined.Sub(addStart))
	fmt.Fprintf(progress, "reader %s joined (AddReader took %v); its share in %v\n", added, joined.Sub(addStart).Round(time.Millisecond), o.JoinWait)
	if err := harness.Sleep(ctx, time.Until(joined.Add(o.JoinWait))); err != nil {
		return nil, err
	}
	share := map[string][2]int{} // client → {its connections on the added reader, on every reader}
	for _, id := range c.Readers() {
		counts, err := countOn(ctx, c, id, smp.users)
		if err != nil {
			return nil, err
		}
		for _, cl := range clients {
			sh := share[cl.Name]
			sh[1] += counts[cl.Name]
			if id == added {
				sh[0] = counts[cl.Name]
			}
			share[cl.Name] = sh
		}
	}
	readersAfterJoin := len(c.Readers())

	// A reader crashes: the one with most of the plain pool's connections
	// (the fault bites where it should), else the first.
	mark("crash")
	crashed := original[0]
	if last, ok := smp.last(); ok {
		most := -1
		for _, id := range original {
			if n := last.Conns[clients[0].Name][id]; n > most {
				crashed, most = id, n
			}
		}
	}
	fmt.Fprintf(progress, "crashing reader %s (pg_ctl stop -m immediate; it stays in the topology and DNS) ...\n", crashed)
	smp.down(crashed)
	crashAt := time.Now()
	if err := c.CrashReader(ctx, crashed); err != nil {
		return nil, err
	}
	crashDone := time.Now()
	res.CrashedReader = crashed
	servedBefore := clients[1].servedSoFar()
	if err := harness.Sleep(ctx, o.CrashFor); err != nil {
		return nil, err
	}

	// A lag spike on another reader: the one that served most of
	// holdfast's reads since the crash (so that the spike bites holdfast,
	// whose goal it is), else the first running one.
	mark("lag")
	lagging, most := "", -1
	servedNow := clients[1].servedSoFar()
	for _, id := range c.Readers() {
		if id == crashed {
			continue
		}
		if n := servedNow[id] - servedBefore[id]; n > most {
			lagging, most = id, n
		}
	}
	fmt.Fprintf(progress, "reader %s lags %v (MaxLag %v, refresh %v: reads on it after %v count) ...\n", lagging, o.Lag, o.MaxLag, o.Refresh, o.MaxLag+o.Refresh)
	lagAt := time.Now()
	if err := c.SetLag(ctx, lagging, o.Lag); err != nil {
		return nil, err
	}
	res.LaggingReader = lagging
	cutoff := lagAt.Add(o.MaxLag + o.Refresh)
	if err := harness.Sleep(ctx, time.Until(cutoff.Add(o.LagFor))); err != nil {
		return nil, err
	}
	wl.Stop()
	end := time.Now()
	phases[len(phases)-1].end = end

	measure(res, clients, phases, smp.samples, moments{begin: begin, original: original, added: added, joined: joined,
		share: share, readersAfterJoin: readersAfterJoin, crashAt: crashAt, crashDone: crashDone, lagging: lagging, lagAt: lagAt, cutoff: cutoff})
	return res, nil
}

// createRoles creates each client's login role on the writer and waits
// until every reader has replayed them: each client's connections are
// counted by its role.
func createRoles(ctx context.Context, c *failovertest.Cluster, clients []*client) error {
	w, err := pgx.Connect(ctx, c.DSN(c.Addr(c.Writer())))
	if err != nil {
		return err
	}
	defer w.Close(context.Background())
	var names []string
	for _, cl := range clients {
		if _, err := w.Exec(ctx, "CREATE ROLE "+pgx.Identifier{cl.Name}.Sanitize()+" LOGIN SUPERUSER"); err != nil {
			return err
		}
		names = append(names, cl.Name)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, id := range c.Readers() {
		for {
			n, err := rolesOn(wctx, c, id, names)
			if err == nil && n == len(names) {
				break
			}
			if err := harness.Sleep(wctx, 50*time.Millisecond); err != nil {
				return fmt.Errorf("reader %s never replayed the roles: %w", id, err)
			}
		}
	}
	return nil
}

func rolesOn(ctx context.Context, c *failovertest.Cluster, id string, names []string) (int, error) {
	conn, err := pgx.Connect(ctx, c.DSN(c.Addr(id)))
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(ctx, "SELECT count(*) FROM pg_roles WHERE rolname = ANY($1)", names).Scan(&n)
	return n, err
}

// waitOpen waits until pool has n connections open (dials under way not
// counted), at most 30 s.
func waitOpen(ctx context.Context, pool *pgxpool.Pool, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	open := func() int32 { s := pool.Stat(); return s.IdleConns() + s.AcquiredConns() }
	for open() < int32(n) {
		if err := harness.Sleep(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("%d of %d connections open: %w", open(), n, err)
		}
	}
	return nil
}
