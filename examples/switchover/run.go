package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/examples/harness"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/bluegreentest"
	"github.com/holdfast-db/holdfast/rdsiam"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// run starts an Env (unless env is given), plays the switchover under the
// workload and returns the measurements. progress receives the live lines.
func run(ctx context.Context, env *bluegreentest.Env, o options, progress io.Writer) (*Result, error) {
	if o.Workers < 1 {
		return nil, errors.New("-workers must be at least 1")
	}
	if !slices.Contains(bluegreentest.Scenarios(), o.Scenario) {
		return nil, fmt.Errorf("unknown scenario %q", o.Scenario)
	}
	if env == nil {
		fmt.Fprintln(progress, "starting blue (127.0.0.11) and green (127.0.0.21) PostgreSQL servers ...")
		var err error
		env, err = bluegreentest.Start(ctx, bluegreentest.Config{TLS: true, Settings: bluegreentest.ReplicationSettings(),
			IAM: o.Scenario == bluegreentest.ScenarioIAM, NodeCerts: o.Scenario == bluegreentest.ScenarioNodeCerts})
		if err != nil {
			return nil, err
		}
		defer env.Close()
	}
	printMode(progress, env)
	if o.Engine == 0 {
		o.Engine = bluegreentest.Aurora
	}
	d, err := env.NewDeployment(ctx, bluegreentest.DeploymentConfig{Name: o.Name, Engine: o.Engine, ClusterEndpointsOnly: o.ClusterOnly})
	if err != nil {
		return nil, err
	}
	repl, err := d.Replicate(ctx, ddl, "public.requests")
	if err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = repl.Stop(cctx)
		_ = d.Drop(cctx)
	}()
	if err := d.CreateRole(ctx, "app"); err != nil {
		return nil, err
	}
	// The deployment exists (AVAILABLE) before the clients start, as a real
	// one exists for hours before its switchover.
	if err := d.SetStatus(ctx, bluegreentest.StatusAvailable); err != nil {
		return nil, err
	}
	dns := env.Resolver.Cached(o.DNSTTL)
	host := d.Names.Cluster
	if o.Engine == bluegreentest.RDS || o.Endpoint == "instance" {
		host = d.Names.Instance
	}
	poolCfg := func() (*pgxpool.Config, error) {
		cfg, err := d.RolePoolConfig(host, "app", fmt.Sprintf("pool_max_conns=%d", o.Workers))
		if err != nil {
			return nil, err
		}
		cfg.ConnConfig.LookupFunc = dns.Lookup
		return cfg, nil
	}
	// With IAM, both clients sign tokens with package rdsiam (made-up AWS
	// credentials: the simulator checks what a token is signed for, not
	// its signature).
	iam := env.Config().IAM
	token := rdsiam.Config{Endpoint: net.JoinHostPort(host, strconv.Itoa(env.Blue.Port)), Region: bluegreentest.DefaultRegion,
		User: "app", Credentials: credentials.NewStaticCredentialsProvider("AKIAEXAMPLEFAKE00000", "fake-secret", "")}

	// The holdfast factory: blue/green routing with every default.
	logger := o.Logger(nil)
	hfOpts := []holdfast.Option{holdfast.WithBlueGreen(bluegreen.Config{Logger: logger}), holdfast.WithLogger(logger)}
	if o.Failover {
		// Every default: the instance endpoints are derived from the
		// cluster endpoint's name, the logger is the factory's.
		hfOpts = append(hfOpts, holdfast.WithFailover(failover.Config{}))
	}
	switch {
	case iam && o.SignConfigured:
		sign, err := rdsiam.PasswordFunc(token)
		if err != nil {
			return nil, err
		}
		// Signed for the configured host whatever host holdfast says.
		hfOpts = append(hfOpts, holdfast.WithPasswordFunc(func(ctx context.Context, _ string) (string, error) { return sign(ctx) }),
			holdfast.WithClassifier(rdsiam.Rules()...))
	case iam:
		hfOpts = append(hfOpts, rdsiam.With(token)) // signs for the server each connection reaches
	}
	f, err := holdfast.New(hfOpts...)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The pools (with -sql, a *sql.DB too). With IAM, the plain pool does what a pgxpool user does: a
	// fresh token for the configured endpoint before each connect.
	pools, err := harness.OpenPools(ctx, f, o.SQL, func(client string) (*pgxpool.Config, error) {
		cfg, err := poolCfg()
		if err != nil || !iam || client != "pgxpool" {
			return cfg, err
		}
		sign, err := rdsiam.PasswordFunc(token)
		cfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) (err error) {
			cc.Password, err = sign(ctx)
			return err
		}
		return cfg, err
	})
	if err != nil {
		return nil, err
	}
	defer pools.Close()
	// The plain client: the retry loop an application writes by hand
	// around an idempotent transaction, classified by the built-in rules.
	// The ids are unique across the clients, which write the same table.
	var ids atomic.Int64
	// The plain client's retry: a handful of attempts within the bluegreen
	// ConnectTimeout.
	plain := newClient("pgxpool", &harness.Writer{Acquire: pools.Plain.Acquire,
		Retrier: &retry.Retrier{Policy: harness.RetryPolicy(5, 35*time.Second), Classify: classify.Classify}}, &ids)
	hfPool := pools.Holdfast
	router := f.BlueGreen(hfPool)
	hf := newClient("holdfast", &harness.Writer{F: f, Pool: hfPool}, &ids)
	if err := waitFor(ctx, router, func(s bluegreen.Status) bool {
		for _, m := range s.Mapping { // the pools' host is mapped to green
			if m.Blue == host && m.GreenAddr != "" {
				return s.Phase == bluegreen.Created
			}
		}
		return false
	}); err != nil {
		return nil, fmt.Errorf("holdfast did not see the deployment: %w", err)
	}
	metadata := ""
	if d.ClusterEndpointsOnly {
		metadata = ", metadata with cluster endpoints only"
	}
	fmt.Fprintf(progress, "deployment %q (%s%s) on %s, DNS TTL %v, %d workers per pool, scenario %s\n",
		d.Name, o.Engine, metadata, host, o.DNSTTL, o.Workers, o.Scenario)

	// The workload.
	clients := []*harness.Client{plain, hf}
	if o.SQL {
		// database/sql over its own holdfast pool (same factory), its
		// transactions through sqldb.RunTx.
		clients = append(clients, newClient("database/sql", &harness.Writer{F: f, DB: pools.DB}, &ids))
	}
	var scriptPhase atomic.Value
	scriptPhase.Store(bluegreentest.StatusAvailable)
	wl := harness.Start(clients, harness.Config{Workers: o.Workers, Think: o.Think, Timeout: 45 * time.Second, ErrorKey: errorKey})
	begin := wl.Begin
	wl.Progress(progress, func(b *strings.Builder, counts []harness.Count) {
		st := router.Status()
		fmt.Fprintf(b, "  %-35s holdfast=%-11s", scriptPhase.Load().(string), st.Phase)
		harness.WriteCounts(b, counts)
		fmt.Fprintf(b, " | held %d", st.Waiting)
	})

	// The switchover, after the warmup.
	var sres bluegreentest.SwitchoverResult
	err = harness.Sleep(ctx, o.Warmup)
	if err == nil {
		sres, err = d.Switchover(ctx, bluegreentest.SwitchoverConfig{Scenario: o.Scenario, Timings: o.Timings, Replication: repl,
			OnEvent: func(e bluegreentest.ScriptEvent) { scriptPhase.Store(e.Name) }})
	}
	if err != nil {
		wl.Stop()
		return nil, err
	}
	scriptEnd := time.Now()
	// Let holdfast finish its summary (it needs DNS to have caught up,
	// through the cache), then settle.
	if sres.Switched && o.Scenario != bluegreentest.ScenarioStuck {
		_ = waitFor(ctx, router, func(s bluegreen.Status) bool {
			return s.LastSummary != nil || time.Since(scriptEnd) > o.DNSTTL+3*time.Second
		})
	}
	_ = harness.Sleep(ctx, o.Settle)
	if o.Duration > 0 {
		_ = harness.Sleep(ctx, o.Duration-time.Since(begin))
	}
	wl.Stop()
	end := time.Now()
	res, err := measure(ctx, d, sres, scriptEnd, router, clients)
	if err == nil && o.Failover {
		if m := f.Failover(hfPool); m != nil {
			st := m.Status()
			res.failover = &st
		}
	}
	if err == nil && o.SVG != "" {
		if err = res.chart(begin, end, sres, clients).WriteFile(o.SVG); err == nil {
			fmt.Fprintf(progress, "timeline drawn in %s\n", o.SVG)
		}
	}
	return res, err
}

// printMode says how the servers are reached: at two addresses, or at two
// ports of 127.0.0.1 behind the simulator's dialer.
func printMode(w io.Writer, env *bluegreentest.Env) {
	b, g := env.Blue, env.Green
	if !env.SingleIP {
		fmt.Fprintf(w, "mode: two addresses: blue %s, green %s (one port, as two RDS instances)\n", b.ListenAddr, g.ListenAddr)
		return
	}
	fmt.Fprintf(w, "mode: single address (%s): blue listens on %s, green on %s;\n", env.SingleIPReason, b.ListenAddr, g.ListenAddr)
	fmt.Fprintf(w, "      the simulator's dialer presents them as %s:%d and %s:%d, so holdfast sees the same topology.\n",
		b.Host, b.Port, g.Host, g.Port)
	fmt.Fprintf(w, "      To run with two addresses, add them to the loopback interface (%s).\n", bluegreentest.AliasHelp)
}

// waitFor waits until cond holds on the router's status, or ctx ends, or
// 30 s pass.
func waitFor(ctx context.Context, r bluegreen.Router, cond func(bluegreen.Status) bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond) // for conditions on time
	defer tick.Stop()
	for {
		ch := r.Changed()
		if cond(r.Status()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		case <-tick.C:
		}
	}
}
