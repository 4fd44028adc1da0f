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
// and runs each transaction with the factory's runner, Factory.BeginTxFunc
// (sqldb.BeginTxFunc for -sql), which re-runs it only when nothing
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

// command is the command: its flags, its run, its table.
var command = harness.Command[options, *Result]{Name: "switchover", Defaults: defaultOptions, Flags: (*options).flags, Print: (*Result).print,
	Run: func(ctx context.Context, o options, progress io.Writer) (*Result, error) {
		return run(ctx, nil, o, progress)
	},
}

func main() { command.Exit() }

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
		hfOpts = append(hfOpts, holdfast.WithPasswordFunc(sign), holdfast.WithClassifier(rdsiam.Rules()...))
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
	plain := newClient("pgxpool", &harness.Writer{Acquire: pools.Plain.Acquire,
		Retrier: &retry.Retrier{Policy: requestPolicy(), Classify: classify.Classify}}, &ids)
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
		// transactions through sqldb.BeginTxFunc.
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

// requestPolicy is the holdfast client's retry around a transaction: a
// handful of attempts within the bluegreen ConnectTimeout.
func requestPolicy() retry.Policy {
	p := retry.Default()
	p.MaxAttempts = 5
	p.InitialInterval = 50 * time.Millisecond
	p.MaxElapsed = 35 * time.Second
	return p
}

// waitFor waits until cond holds on the router's status, or ctx ends, or
// 30 s pass.
func waitFor(ctx context.Context, r *bluegreen.Router, cond func(bluegreen.Status) bool) error {
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
