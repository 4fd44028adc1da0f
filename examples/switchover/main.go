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
	"crypto/x509"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/examples/timeline"
	"github.com/holdfast-db/holdfast/failover"
	"github.com/holdfast-db/holdfast/fakes/bluegreentest"
	"github.com/holdfast-db/holdfast/rdsiam"
	"github.com/holdfast-db/holdfast/retry"
	"github.com/holdfast-db/holdfast/sqldb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// options are the command's flags.
type options struct {
	Scenario bluegreentest.Scenario
	Timings  bluegreentest.Timings
	Workers  int
	Think    time.Duration // pause between a worker's requests
	Warmup   time.Duration // workload before the switchover starts
	Settle   time.Duration // workload after the script ends
	Duration time.Duration // minimum workload time (0: warmup + script + settle)
	DNSTTL   time.Duration
	JSON     bool
	Verbose  bool   // holdfast's logs on stderr
	SQL      bool   // a third client: database/sql (package sqldb) over a holdfast pool
	Name     string // deployment name
	Engine   bluegreentest.Engine
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
		Scenario: bluegreentest.ScenarioNormal,
		Workers:  4,
		Think:    10 * time.Millisecond,
		Warmup:   2 * time.Second,
		Settle:   2 * time.Second,
		DNSTTL:   time.Second,
		Name:     "orders",
		Engine:   bluegreentest.Aurora,
		Endpoint: "cluster",
	}
}

func main() { os.Exit(cmd(os.Args[1:], os.Stdout, os.Stderr)) }

// cmd runs the command and returns its exit code.
func cmd(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2 // parseFlags has printed the error
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	progress := stdout
	if o.JSON {
		progress = stderr
	}
	res, err := run(ctx, nil, o, progress)
	if err != nil {
		fmt.Fprintln(stderr, "switchover:", err)
		return 1
	}
	if o.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			fmt.Fprintln(stderr, "switchover:", err)
			return 1
		}
		return 0
	}
	res.print(stdout)
	return 0
}

// parseFlags parses the command line into options; usage and errors go to
// errOut.
func parseFlags(args []string, errOut io.Writer) (options, error) {
	o := defaultOptions()
	fs := flag.NewFlagSet("switchover", flag.ContinueOnError)
	fs.SetOutput(errOut)
	scenario := fs.String("scenario", string(o.Scenario), "normal | rollback | dns-before-post | stuck | slow-dns | frozen-blue | frozen-blue-post | iam (RDS IAM tokens checked by host) | node-certs (per-node certificates, renewed after COMPLETED)")
	fs.IntVar(&o.Workers, "workers", o.Workers, "concurrent workers per pool")
	fs.DurationVar(&o.Think, "think", o.Think, "pause between a worker's requests")
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "workload before the switchover starts")
	fs.DurationVar(&o.Settle, "settle", o.Settle, "workload after the switchover script ends")
	fs.DurationVar(&o.Duration, "duration", 0, "minimum workload duration (0: warmup + switchover + settle)")
	fs.DurationVar(&o.DNSTTL, "dns-ttl", o.DNSTTL, "client-side DNS cache TTL (0: no cache)")
	fs.DurationVar(&o.Timings.Preparation, "preparation", 0, "SWITCHOVER_INITIATED duration (default 3s)")
	fs.DurationVar(&o.Timings.InProgress, "in-progress", 0, "SWITCHOVER_IN_PROGRESS duration (default 2s)")
	fs.DurationVar(&o.Timings.BlueDNS, "blue-dns", 0, "blue DNS update after POST (default 3s; slow-dns 20s)")
	fs.DurationVar(&o.Timings.Completed, "completed", 0, "SWITCHOVER_COMPLETED after POST (default 4s)")
	engine := fs.String("engine", "aurora", "aurora (cluster endpoint, Aurora metadata) | rds (instance endpoint, rds_tools metadata)")
	fs.StringVar(&o.Endpoint, "endpoint", o.Endpoint, "cluster | instance: the endpoint the pools connect to (Aurora)")
	fs.BoolVar(&o.ClusterOnly, "cluster-only", false, "the metadata lists only the cluster endpoints (Aurora): instances come from aurora_replica_status()")
	fs.BoolVar(&o.JSON, "json", false, "print the result as one JSON object (progress goes to stderr)")
	fs.BoolVar(&o.Verbose, "v", false, "print holdfast's logs on stderr")
	fs.BoolVar(&o.SQL, "sql", false, "add a third client: database/sql (package sqldb) over a holdfast pool")
	fs.BoolVar(&o.Failover, "failover", false, "the holdfast pool also gets writer-failover routing (holdfast.WithFailover(failover.Config{}))")
	fs.StringVar(&o.SVG, "svg", "", "draw the run into this SVG `file`: requests per 100 ms per client, ok and failed, the phases, each client's longest pause")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.Scenario = bluegreentest.Scenario(*scenario)
	switch *engine {
	case "aurora":
		o.Engine = bluegreentest.Aurora
	case "rds":
		o.Engine = bluegreentest.RDS
	default:
		err := fmt.Errorf("unknown -engine %q", *engine)
		fmt.Fprintln(errOut, "switchover:", err)
		return o, err
	}
	if !slices.Contains(bluegreentest.Scenarios(), o.Scenario) {
		err := fmt.Errorf("unknown -scenario %q", *scenario)
		fmt.Fprintln(errOut, "switchover:", err)
		return o, err
	}
	if o.Endpoint != "cluster" && o.Endpoint != "instance" {
		err := fmt.Errorf("unknown -endpoint %q", o.Endpoint)
		fmt.Fprintln(errOut, "switchover:", err)
		return o, err
	}
	if o.Workers < 1 {
		err := fmt.Errorf("-workers %d: must be at least 1", o.Workers)
		fmt.Fprintln(errOut, "switchover:", err)
		return o, err
	}
	return o, nil
}

// Result is what the command measured; its JSON form is the -json output.
type Result struct {
	Scenario bluegreentest.Scenario `json:"scenario"`
	Workers  int                    `json:"workers"`
	// InProgressMS is the simulated IN_PROGRESS window: from the
	// SWITCHOVER_IN_PROGRESS write to the SWITCHOVER_IN_POST_PROCESSING
	// write (to the rollback, or to the blue DNS update when the status is
	// stuck).
	InProgressMS float64        `json:"in_progress_ms"`
	Primary      string         `json:"primary"` // "green" after a switchover, "blue" after a rollback
	Clients      []ClientResult `json:"clients"`
	// Timeline is holdfast's switchover timeline (offsets from IN_PROGRESS).
	Timeline []TimelineEvent `json:"timeline"`
	Outcome  string          `json:"outcome,omitempty"` // holdfast's summary outcome, "" when none yet
	// MonitorConnects counts the connections holdfast's two blue/green
	// monitors opened during the run (a reconnect storm shows here).
	MonitorConnects int `json:"monitor_connects"`
	// AliasedCerts counts holdfast's TLS handshakes whose certificate was
	// valid for the green counterpart of the blue name asked for, not for
	// the name itself (bluegreen.Status.AliasedCerts).
	AliasedCerts int64 `json:"aliased_certs"`
	// Script is what the simulator did (offsets from IN_PROGRESS).
	Script []TimelineEvent `json:"script"`

	summary string
	// failover is the holdfast pool's failover monitor's status at the
	// end, with -failover (for the tests; not printed).
	failover *failover.Status
}

// ClientResult is one client's figures.
type ClientResult struct {
	Name     string `json:"name"` // "pgxpool" or "holdfast"
	Requests int    `json:"requests"`
	OK       int    `json:"ok"`
	Failed   int    `json:"failed"`
	// Retries counts the runs of transactions after their first, by the
	// workload's own retry (the table's "application retries"): the
	// plain client's hand-written loop, the holdfast clients' runner.
	Retries int `json:"retries"`
	// OKAfterCompleted counts the requests that succeeded after
	// SWITCHOVER_COMPLETED; absent when the script wrote no COMPLETED.
	OKAfterCompleted *int `json:"ok_after_completed,omitempty"`
	// Runner: its transactions ran through holdfast's runner, and
	// OutcomeUnknown counts its requests whose COMMIT was sent and its
	// answer lost (holdfast.ErrOutcomeUnknown), each then resolved by
	// looking its id up on the primary (client.resolve).
	Runner         bool    `json:"runner"`
	OutcomeUnknown int     `json:"outcome_unknown"`
	MaxPauseMS     float64 `json:"max_pause_ms"`
	// P50MS and P99MS are over the requests started during the switchover
	// (from SWITCHOVER_INITIATED to the end of the script).
	P50MS           float64        `json:"p50_ms"`
	P99MS           float64        `json:"p99_ms"`
	Acknowledged    int            `json:"acknowledged_writes"`
	LostWrites      int            `json:"lost_writes"`
	MisplacedWrites int            `json:"misplaced_writes"`
	Errors          map[string]int `json:"errors"` // SQLSTATE, or class/reason

	// readOnlyAfterCompleted counts the requests that failed with 25006
	// after SWITCHOVER_COMPLETED.
	readOnlyAfterCompleted int
}

// TimelineEvent is one event and its offset from IN_PROGRESS.
type TimelineEvent struct {
	Event    string  `json:"event"`
	OffsetMS float64 `json:"offset_ms"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// client is one pool under the workload.
type client struct {
	name    string
	pool    *pgxpool.Pool
	acquire func(context.Context) (*pgxpool.Conn, error)
	db      *sql.DB           // the database/sql client: requests go through it instead
	f       *holdfast.Factory // the holdfast clients: transactions through f's runner
	retrier *retry.Retrier    // the plain client: its hand-written retry loop

	ok, failed atomic.Int64
	recs       [][]record // per worker
}

// record is one request.
type record struct {
	id       int64
	start    time.Time
	took     time.Duration
	err      string // "" when it succeeded
	attempts int    // runs of the transaction
	unknown  bool   // its error is holdfast.ErrOutcomeUnknown
}

const ddl = `CREATE TABLE IF NOT EXISTS public.requests (
	id     bigint PRIMARY KEY,
	client text NOT NULL,
	worker integer NOT NULL,
	at     timestamptz NOT NULL DEFAULT now()
);`

// classifier names errors that carry no SQLSTATE.
var classifier = classify.New(bluegreen.Rule)

// errorKey is the SQLSTATE of err, else its class and reason.
func errorKey(err error) string {
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, holdfast.ErrOutcomeUnknown):
		return holdfast.ReasonOutcomeUnknown
	case errors.As(err, &pe):
		return pe.Code
	}
	var hn x509.HostnameError
	if errors.As(err, &hn) {
		return keyCertName
	}
	return classifier.Classify(err).String()
}

// keyCertName is the error key of a server certificate not valid for the
// name connected by (sslmode=verify-full).
const keyCertName = "x509-name"

// request runs one transaction: insert id, read it back, commit; runs
// counts the runs. The holdfast clients run it with the factory's
// transaction runner, the plain client with its retry loop.
func (c *client) request(ctx context.Context, id int64, worker int, runs *int) error {
	switch {
	case c.f != nil && c.db != nil:
		return sqldb.BeginTxFunc(ctx, c.f, c.db, nil, func(tx *sql.Tx) error {
			*runs++
			return c.sqlWork(ctx, tx, id, worker)
		})
	case c.f != nil:
		return c.f.BeginTxFunc(ctx, c.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
			*runs++
			return c.work(ctx, tx, id, worker)
		})
	}
	return c.retrier.Do(ctx, func(ctx context.Context) error {
		*runs++
		conn, err := c.acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return c.work(ctx, tx, id, worker) })
	})
}

// insert is the transaction's write: a plain INSERT for the holdfast
// clients, whose runner never applies a transaction twice (a second
// apply would fail: 23505), and INSERT … ON CONFLICT DO NOTHING for the
// plain client, whose retry loop re-runs a COMMIT whose answer was lost.
func (c *client) insert() string {
	if c.f != nil {
		return "INSERT INTO public.requests (id, client, worker) VALUES ($1, $2, $3)"
	}
	return "INSERT INTO public.requests (id, client, worker) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING"
}

// work is the transaction's work on tx.
func (c *client) work(ctx context.Context, tx pgx.Tx, id int64, worker int) error {
	if _, err := tx.Exec(ctx, c.insert(), id, c.name, worker); err != nil {
		return err
	}
	var got int64
	if err := tx.QueryRow(ctx, "SELECT id FROM public.requests WHERE id = $1", id).Scan(&got); err != nil {
		return err
	}
	if got != id {
		return fmt.Errorf("read back %d, want %d", got, id)
	}
	return nil
}

// sqlWork is work through database/sql.
func (c *client) sqlWork(ctx context.Context, tx *sql.Tx, id int64, worker int) error {
	if _, err := tx.ExecContext(ctx, c.insert(), id, c.name, worker); err != nil {
		return err
	}
	var got int64
	if err := tx.QueryRowContext(ctx, "SELECT id FROM public.requests WHERE id = $1", id).Scan(&got); err != nil {
		return err
	}
	if got != id {
		return fmt.Errorf("read back %d, want %d", got, id)
	}
	return nil
}

// resolve settles a request whose COMMIT's outcome is unknown
// (holdfast.ErrOutcomeUnknown) as an application with an idempotency key
// does: it looks the key up on the primary, in a new transaction through
// the runner; found, the request is done; absent, the transaction did not
// commit, and it runs again (a plain INSERT: had it committed, the new
// run would fail with 23505, not apply twice).
func (c *client) resolve(ctx context.Context, id int64, worker int, runs *int) error {
	const lookup = "SELECT EXISTS (SELECT 1 FROM public.requests WHERE id = $1)"
	var found bool
	var err error
	if c.db != nil {
		err = sqldb.BeginTxFunc(ctx, c.f, c.db, nil, func(tx *sql.Tx) error {
			return tx.QueryRowContext(ctx, lookup, id).Scan(&found)
		})
	} else {
		err = c.f.BeginTxFunc(ctx, c.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, lookup, id).Scan(&found)
		})
	}
	switch {
	case err != nil:
		return err
	case found:
		return nil
	}
	return c.request(ctx, id, worker, runs)
}

// loop runs requests until stop is closed.
func (c *client) loop(worker int, ids *atomic.Int64, stop <-chan struct{}, think time.Duration) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		id := ids.Add(1)
		start := time.Now()
		// Each request is bounded; the stop signal never cancels one midway.
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		runs := 0
		err := c.request(ctx, id, worker, &runs)
		unknown := errors.Is(err, holdfast.ErrOutcomeUnknown)
		if unknown {
			err = c.resolve(ctx, id, worker, &runs)
		}
		cancel()
		r := record{id: id, start: start, took: time.Since(start), attempts: runs, unknown: unknown}
		if err != nil {
			r.err = errorKey(err)
			c.failed.Add(1)
		} else {
			c.ok.Add(1)
		}
		c.recs[worker] = append(c.recs[worker], r)
		t.Reset(think)
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

	// The plain pool.
	cfg, err := poolCfg()
	if err != nil {
		return nil, err
	}
	if iam {
		// What a pgxpool user does: a fresh token for the configured
		// endpoint before each connect.
		sign, err := rdsiam.PasswordFunc(token)
		if err != nil {
			return nil, err
		}
		cfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) (err error) {
			cc.Password, err = sign(ctx)
			return err
		}
	}
	plainPool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer plainPool.Close()
	// The retry loop an application writes by hand around an idempotent
	// transaction, classified by the built-in rules.
	plain := &client{name: "pgxpool", pool: plainPool, acquire: plainPool.Acquire,
		retrier: &retry.Retrier{Policy: requestPolicy(), Classify: classify.Classify}}

	// The holdfast pool: blue/green routing with every default.
	logOut := io.Discard
	if o.Verbose {
		logOut = os.Stderr
	}
	logger := slog.New(slog.NewTextHandler(logOut, nil))
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
	if cfg, err = poolCfg(); err != nil {
		return nil, err
	}
	hfPool, err := f.NewPool(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer hfPool.Close()
	router := f.BlueGreen(hfPool)
	hf := &client{name: "holdfast", pool: hfPool, f: f}
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
	clients := []*client{plain, hf}
	if o.SQL {
		// database/sql over its own holdfast pool (same factory), its
		// transactions through sqldb.BeginTxFunc.
		if cfg, err = poolCfg(); err != nil {
			return nil, err
		}
		db, err := sqldb.Open(ctx, f, cfg)
		if err != nil {
			return nil, err
		}
		defer db.Close()
		clients = append(clients, &client{name: "database/sql", db: db, f: f})
	}
	var ids atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	begin := time.Now()
	for _, c := range clients {
		c.recs = make([][]record, o.Workers)
		for w := range o.Workers {
			wg.Go(func() { c.loop(w, &ids, stop, o.Think) })
		}
	}
	var scriptPhase atomic.Value
	scriptPhase.Store(bluegreentest.StatusAvailable)
	progressDone := make(chan struct{})
	var pwg sync.WaitGroup
	pwg.Go(func() { printProgress(progress, begin, clients, router, &scriptPhase, progressDone) })
	stopAll := func() {
		close(stop)
		wg.Wait()
		close(progressDone)
		pwg.Wait()
	}

	// The switchover, after the warmup.
	var sres bluegreentest.SwitchoverResult
	err = sleepCtx(ctx, o.Warmup)
	if err == nil {
		sres, err = d.Switchover(ctx, bluegreentest.SwitchoverConfig{Scenario: o.Scenario, Timings: o.Timings, Replication: repl,
			OnEvent: func(e bluegreentest.ScriptEvent) { scriptPhase.Store(e.Name) }})
	}
	if err != nil {
		stopAll()
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
	_ = sleepCtx(ctx, o.Settle)
	if o.Duration > 0 {
		_ = sleepCtx(ctx, o.Duration-time.Since(begin))
	}
	stopAll()
	end := time.Now()
	res, err := measure(ctx, d, sres, scriptEnd, router, clients)
	if err == nil && o.Failover {
		if m := f.Failover(hfPool); m != nil {
			st := m.Status()
			res.failover = &st
		}
	}
	if err == nil && o.SVG != "" {
		if err = res.chart(o, begin, end, sres, clients).WriteFile(o.SVG); err == nil {
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

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// printProgress prints a line per second until done is closed.
func printProgress(w io.Writer, begin time.Time, clients []*client, r *bluegreen.Router, script *atomic.Value, done <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := make([][2]int64, len(clients))
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		st := r.Status()
		var b strings.Builder
		fmt.Fprintf(&b, "%5.1fs  %-35s holdfast=%-11s", time.Since(begin).Seconds(), script.Load().(string), st.Phase)
		for i, c := range clients {
			ok, failed := c.ok.Load(), c.failed.Load()
			fmt.Fprintf(&b, " | %-8s ok %4d fail %4d", c.name, ok-last[i][0], failed-last[i][1])
			last[i] = [2]int64{ok, failed}
		}
		fmt.Fprintf(&b, " | held %d", st.Waiting)
		fmt.Fprintln(w, b.String())
	}
}

// measure computes the figures and checks every write against both
// servers.
func measure(ctx context.Context, d *bluegreentest.Deployment, sres bluegreentest.SwitchoverResult, scriptEnd time.Time,
	r *bluegreen.Router, clients []*client) (*Result, error) {
	res := &Result{Scenario: sres.Scenario, Workers: len(clients[0].recs), Primary: "blue"}
	primary, other := d.Env.Blue, d.Env.Green
	if sres.Switched {
		primary, other, res.Primary = d.Env.Green, d.Env.Blue, "green"
	}
	anchor, _ := sres.At(bluegreentest.StatusInProgress)
	windowStart, _ := sres.At(bluegreentest.StatusInitiated)
	end, ok := sres.At(bluegreentest.StatusPostProcessing)
	if !ok {
		if end, ok = sres.At(bluegreentest.ScriptRolledBack); !ok {
			end, _ = sres.At(bluegreentest.ScriptBlueDNSUpdated)
		}
	}
	res.InProgressMS = ms(end.Sub(anchor))
	for _, e := range sres.Events {
		res.Script = append(res.Script, TimelineEvent{Event: e.Name, OffsetMS: ms(e.Time.Sub(anchor))})
	}
	st := r.Status()
	for _, m := range st.Monitors {
		res.MonitorConnects += m.Connects
	}
	res.AliasedCerts = st.AliasedCerts
	if s, ok := r.LastSummary(); ok {
		res.Outcome = s.Outcome.String()
		res.summary = s.String()
		for _, e := range s.Events {
			res.Timeline = append(res.Timeline, TimelineEvent{Event: e.Name, OffsetMS: ms(s.Offset(e))})
		}
	} else {
		st := r.Status()
		var b strings.Builder
		fmt.Fprintf(&b, "(no summary yet: the switchover has not ended for holdfast; phase %s, routing %v)\n", st.Phase, st.Routing.Phase)
		width := 31
		for _, e := range st.Timeline {
			width = max(width, len(e.Name))
		}
		for _, e := range st.Timeline {
			res.Timeline = append(res.Timeline, TimelineEvent{Event: e.Name, OffsetMS: ms(e.Time.Sub(anchor))})
			fmt.Fprintf(&b, "%28s %18d ms %*s\n", e.Time.UTC().Format("2006-01-02T15:04:05.000Z"), e.Time.Sub(anchor).Milliseconds(), width, e.Name)
		}
		res.summary = strings.TrimRight(b.String(), "\n")
	}

	completed, isCompleted := sres.At(bluegreentest.StatusCompleted)
	for _, c := range clients {
		onPrimary, err := idsOf(ctx, primary, d.Database, c.name)
		if err != nil {
			return nil, err
		}
		onOther, err := idsOf(ctx, other, d.Database, c.name)
		if err != nil {
			return nil, err
		}
		cr := ClientResult{Name: c.name, Errors: map[string]int{}, Runner: c.f != nil}
		okAfter := 0
		if isCompleted {
			cr.OKAfterCompleted = &okAfter
		}
		var during []time.Duration
		var maxPause time.Duration
		for _, recs := range c.recs {
			for _, rec := range recs {
				cr.Requests++
				if rec.attempts > 1 {
					cr.Retries += rec.attempts - 1
				}
				maxPause = max(maxPause, rec.took)
				if !rec.start.Before(windowStart) && rec.start.Before(scriptEnd) {
					during = append(during, rec.took)
				}
				if rec.unknown {
					cr.OutcomeUnknown++
				}
				after := isCompleted && rec.start.Add(rec.took).After(completed)
				if rec.err != "" {
					cr.Failed++
					cr.Errors[rec.err]++
					if after && rec.err == "25006" {
						cr.readOnlyAfterCompleted++
					}
					continue
				}
				if after {
					okAfter++
				}
				cr.OK++
				cr.Acknowledged++
				if !onPrimary[rec.id] {
					cr.LostWrites++
				}
			}
		}
		for id := range onOther {
			if !onPrimary[id] {
				cr.MisplacedWrites++
			}
		}
		cr.MaxPauseMS = ms(maxPause)
		cr.P50MS, cr.P99MS = ms(percentile(during, 0.50)), ms(percentile(during, 0.99))
		res.Clients = append(res.Clients, cr)
	}
	return res, nil
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// idsOf returns the ids of client's rows on s.
func idsOf(ctx context.Context, s *bluegreentest.Server, db, client string) (map[int64]bool, error) {
	conn, err := pgx.Connect(ctx, s.DSN(db))
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT id FROM public.requests WHERE client = $1", client)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	out := make(map[int64]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

// print writes the holdfast timeline and the side-by-side table.
func (r *Result) print(w io.Writer) {
	fmt.Fprintf(w, "\nsimulated switchover (%s): IN_PROGRESS lasted %.0f ms; primary afterwards: %s\n", r.Scenario, r.InProgressMS, r.Primary)
	for _, e := range r.Script {
		fmt.Fprintf(w, "  %8.0f ms  %s\n", e.OffsetMS, e.Event)
	}
	fmt.Fprintf(w, "\nholdfast timeline summary:\n%s\n\n", r.summary)
	row := func(label string, v func(ClientResult) string) {
		fmt.Fprintf(w, "%-30s", label)
		for _, c := range r.Clients {
			fmt.Fprintf(w, " %12s", v(c))
		}
		fmt.Fprintln(w)
	}
	row("", func(c ClientResult) string { return c.Name })
	row("requests", func(c ClientResult) string { return fmt.Sprint(c.Requests) })
	row("failed requests", func(c ClientResult) string { return fmt.Sprint(c.Failed) })
	keys := map[string]bool{}
	for _, c := range r.Clients {
		for k := range c.Errors {
			keys[k] = true
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		row("  "+describe(k), func(c ClientResult) string { return fmt.Sprint(c.Errors[k]) })
	}
	row("outcome unknown", func(c ClientResult) string {
		if !c.Runner {
			return "-"
		}
		return fmt.Sprint(c.OutcomeUnknown)
	})
	row("application retries", func(c ClientResult) string { return fmt.Sprint(c.Retries) })
	row("longest pause (ms)", func(c ClientResult) string { return fmt.Sprintf("%.0f", c.MaxPauseMS) })
	row("p50 during switchover (ms)", func(c ClientResult) string { return fmt.Sprintf("%.1f", c.P50MS) })
	row("p99 during switchover (ms)", func(c ClientResult) string { return fmt.Sprintf("%.1f", c.P99MS) })
	row("acknowledged writes", func(c ClientResult) string { return fmt.Sprint(c.Acknowledged) })
	row("lost writes", func(c ClientResult) string { return fmt.Sprint(c.LostWrites) })
	row("misplaced writes", func(c ClientResult) string { return fmt.Sprint(c.MisplacedWrites) })
	completed := false
	for _, c := range r.Clients {
		completed = completed || c.OKAfterCompleted != nil
	}
	if completed {
		row("ok after COMPLETED", func(c ClientResult) string { return fmt.Sprint(*c.OKAfterCompleted) })
	}
	if n := r.stuckOnOldBlue(); n != "" {
		fmt.Fprintf(w, "%s: 0 ok after COMPLETED: %s\n", n, stuckOnOldBlue)
	}
	if r.AliasedCerts > 0 {
		fmt.Fprintf(w, "\nholdfast accepted %d certificates for the green counterpart of the blue name asked for\n", r.AliasedCerts)
	}
	fmt.Fprintf(w, `
held (in the progress lines): connects, Acquires and statements holdfast holds at that
  moment, waiting for the switchover to move on instead of failing them.
outcome unknown: requests whose COMMIT was sent and whose answer was lost: holdfast's runner
  returns holdfast.ErrOutcomeUnknown and never runs them again; this program then looks the
  id up on the primary (done if found, run again if not), as an application with an
  idempotency key does ("-": a hand-written retry loop cannot tell, and re-runs them).
application retries: runs of a whole transaction after its first, by the workload's own
  retry: for pgxpool the loop this program writes around each transaction (pgxpool itself
  retries nothing), for holdfast its runner, which re-runs only what did not commit.
longest pause: the slowest single request, retries included. Plain pgxpool does not wait:
  its requests get an error at once (terminated or refused while blue is closed, read-only
  on old blue afterwards) and fail after the same few retries, so its pauses stay short.
  holdfast holds its requests through the switch window (IN_PROGRESS lasted %.0f ms here)
  and then completes them on the new primary: a longer pause, but no failed request.
`, r.InProgressMS)
}

// chart is the run as a timeline (package examples/timeline), from begin
// to end: each client's requests by the time they finished, its slowest
// request as its longest pause, the script's statuses as phases and its
// steps that move traffic as marks.
func (r *Result) chart(o options, begin, end time.Time, sres bluegreentest.SwitchoverResult, clients []*client) timeline.Chart {
	c := timeline.Chart{
		Title:  fmt.Sprintf("Blue/green switchover (scenario %s): plain pgxpool vs holdfast, %d workers each", r.Scenario, r.Workers),
		Length: end.Sub(begin),
	}
	var counts []string
	for i, cl := range clients {
		s := timeline.Series{Name: cl.name}
		var slowest record
		for _, recs := range cl.recs {
			for _, rec := range recs {
				s.Requests = append(s.Requests, timeline.Request{End: rec.start.Add(rec.took).Sub(begin), OK: rec.err == ""})
				if rec.took > slowest.took {
					slowest = rec
				}
			}
		}
		if slowest.took > 0 {
			from := slowest.start.Sub(begin)
			s.Pause = &timeline.Span{From: from, To: from + slowest.took, Label: fmt.Sprintf("longest pause %.0f ms", ms(slowest.took))}
		}
		c.Series = append(c.Series, s)
		counts = append(counts, fmt.Sprintf("%s %d of %d", cl.name, r.Clients[i].Failed, r.Clients[i].Requests))
	}
	c.Subtitle = fmt.Sprintf("IN_PROGRESS lasted %.0f ms, primary afterwards: %s; failed requests: %s", r.InProgressMS, r.Primary, strings.Join(counts, ", "))
	// The phases: each status the script wrote, until the next (or the end).
	phases := map[string]struct{ label, color string }{
		bluegreentest.StatusInitiated:      {"PREPARATION", "#fdf1c7"},
		bluegreentest.StatusInProgress:     {"IN_PROGRESS", "#f9d5d3"},
		bluegreentest.StatusPostProcessing: {"POST", "#d6e6f7"},
		bluegreentest.StatusCompleted:      {"COMPLETED", "#d7f0dc"},
		bluegreentest.ScriptRolledBack:     {"ROLLED BACK", "#e8e8e8"},
	}
	marks := map[string]string{
		bluegreentest.ScriptGreenWritable:  "green writable",
		bluegreentest.ScriptBlueReopened:   "old blue reopens, read-only",
		bluegreentest.ScriptBlueDNSUpdated: "blue names resolve to green",
		bluegreentest.ScriptCertsRenewed:   "certificates renewed",
	}
	for _, e := range sres.Events {
		at := e.Time.Sub(begin)
		if p, ok := phases[e.Name]; ok {
			if n := len(c.Bands); n > 0 {
				c.Bands[n-1].To = at
			}
			c.Bands = append(c.Bands, timeline.Band{Label: p.label, From: at, To: c.Length, Color: p.color})
		}
		if m, ok := marks[e.Name]; ok {
			c.Marks = append(c.Marks, timeline.Mark{Label: m, At: at})
		}
	}
	c.Notes = append(c.Notes, "longest pause: the slowest single request, retries included; holdfast holds its requests through IN_PROGRESS instead of failing them.")
	if n := r.stuckOnOldBlue(); n != "" {
		c.Notes = append(c.Notes, n+": 0 ok after COMPLETED: "+stuckOnOldBlue+".")
	}
	return c
}

// stuckOnOldBlue is why a plain pool succeeds in nothing after COMPLETED.
const stuckOnOldBlue = "its connections opened on old blue in POST, before DNS moved; " +
	"old blue is read-only (25006) and pgxpool keeps them"

// stuckOnOldBlue names the plain client when it succeeded in nothing after
// COMPLETED and failed there with 25006 (its connections on old blue).
func (r *Result) stuckOnOldBlue() string {
	for _, c := range r.Clients {
		if !c.Runner && c.OKAfterCompleted != nil && *c.OKAfterCompleted == 0 && c.readOnlyAfterCompleted > 0 {
			return c.Name
		}
	}
	return ""
}

// describe names an error key for the table.
func describe(k string) string {
	names := map[string]string{
		"57P01":     "57P01 terminated",
		"53300":     "53300 conn refused",
		"25006":     "25006 read-only",
		"57P03":     "57P03 cannot connect",
		"28000":     "28000 IAM token rejected",
		keyCertName: "certificate not for the name",
	}
	if n, ok := names[k]; ok {
		return n
	}
	if len(k) > 27 {
		return k[:27]
	}
	return k
}
