package failovertest

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/holdfast-db/holdfast/fakes/bluegreentest"
	"github.com/holdfast-db/holdfast/fakes/internal/certs"
	"github.com/holdfast-db/holdfast/fakes/internal/pgnode"
	"github.com/holdfast-db/holdfast/fakes/internal/pgurl"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of [Config] and [GlobalConfig].
const (
	DefaultName    = "orders"
	DefaultAccount = bluegreentest.DefaultAccount
	DefaultRegion  = bluegreentest.DefaultRegion
	DefaultTTL     = 5 * time.Second // what Aurora publishes its endpoints with
	// A Global's secondary Region, and how late what the primary writes
	// reaches it (Aurora: "typically under a second").
	DefaultSecondaryRegion = "us-west-2"
	DefaultGlobalLag       = 500 * time.Millisecond
)

// Default addresses of the servers: the first writer, then the replicas
// (the first two as blue and green in fakes/bluegreentest). Further
// replicas follow the scheme: 127.0.0.41, 127.0.0.51, … (see
// [DefaultHost]).
const (
	DefaultWriterHost  = "127.0.0.11"
	DefaultReplicaHost = "127.0.0.21"
	DefaultThirdHost   = "127.0.0.31"
)

// DefaultHost returns the default address of the server with index i (0
// the first writer, 1 the first replica, and so on, readers added with
// [Cluster.AddReader] too): 127.0.0.11, 127.0.0.21, 127.0.0.31, … up to
// 127.0.0.251 (i 24), then 127.0.0.1.
func DefaultHost(i int) string {
	if i < 0 || i > 24 {
		return "127.0.0.1"
	}
	return fmt.Sprintf("127.0.0.%d", 11+10*i)
}

// MaxReplicas is the largest Config.Replicas, and the most readers
// [Cluster.AddReader] lets a cluster have at once.
const MaxReplicas = 8

// ConfigError is the error of [Start] for a [Config] field with a value it
// does not take, and of [StartGlobal] for a [GlobalConfig] field.
type ConfigError struct {
	Field string // "Replicas", "ReplicaHosts", "Engine"; GlobalConfig's "Regions", "Readers"
	Value any
	Want  string // what it takes
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("fakes/failovertest: Config.%s %v: want %s", e.Field, e.Value, e.Want)
}

// Engine is the kind of cluster the servers present themselves as: the
// topology functions they publish.
type Engine string

// The engines.
const (
	// Aurora: pg_catalog.aurora_replica_status() and
	// aurora_db_instance_identifier() (the default).
	Aurora Engine = "aurora"
	// MultiAZ: an RDS Multi-AZ DB cluster's schema rds_tools, instead of
	// Aurora's functions:
	//
	//   - show_topology(client text DEFAULT NULL): id, endpoint, port, a
	//     row per server. id is its dbi resource id ([Cluster.ResourceID],
	//     "db-" and 26 characters such as "db-ABCDEFGHIJKLMNOPQRSTUVWXY1"),
	//     endpoint its instance endpoint, port [TopologyPort] (the port
	//     clients name; the resolver answers the real one).
	//   - dbi_resource_id(): the server's own dbi resource id.
	//   - multi_az_db_cluster_source_dbi_resource_id(): on a reader, a row
	//     with the writer's dbi resource id; on the writer, no row.
	//
	// Aurora's functions are left out, as on RDS: with both, detection
	// that looks for Aurora's first (as holdfast's does) would never see
	// a Multi-AZ DB cluster.
	MultiAZ Engine = "multi-az"
)

// TopologyPort is the port of the instance endpoints that
// rds_tools.show_topology() lists (Engine MultiAZ): the port clients name
// (see [Cluster.DSN]); the resolver answers each server's real one.
const TopologyPort = 5432

// WriterSessionID is the session_id of the writer's row in
// aurora_replica_status().
const WriterSessionID = bluegreentest.WriterSessionID

// ErrNotFound is matched (errors.Is) by the error of [Start] when the
// PostgreSQL server binaries are not installed.
var ErrNotFound = pgtest.ErrNotFound

// Config configures [Start]. The zero value is a cluster "orders" in
// DefaultAccount and DefaultRegion on DefaultWriterHost and
// DefaultReplicaHost, with a client-side DNS cache of DefaultTTL.
type Config struct {
	// Name, Account and Region shape the host names (see [Cluster]).
	Name, Account, Region string
	// Replicas is the number of replicas, 1 (the default) to
	// MaxReplicas. With more than one, a commit waits for any one of them
	// (synchronous_standby_names 'ANY 1 (*)'), and a failover promotes
	// the one that received the most WAL. Other values make [Start]
	// fail with a *[ConfigError]. The replicas are made in parallel.
	Replicas int
	// Seed seeds the random choice of the reader endpoint (each lookup
	// answers one reader at random, as Aurora's does): the same seed, the
	// same sequence of answers. 0 chooses a random seed.
	Seed uint64
	// WriterHost and ReplicaHosts are the loopback addresses of the first
	// writer and the replicas (defaults DefaultWriterHost,
	// DefaultReplicaHost, DefaultThirdHost and on, [DefaultHost]); a
	// reader added by [Cluster.AddReader] takes the next of ReplicaHosts,
	// or DefaultHost's beyond them. When they cannot be bound
	// (macOS without aliases) every server listens on 127.0.0.1, each on
	// its own port; the resolver answers "ip:port", so clients see no
	// difference.
	WriterHost   string
	ReplicaHosts []string
	// TTL is the client-side DNS cache's TTL ([Cluster.Cache]); negative
	// caches nothing. Default DefaultTTL.
	TTL time.Duration
	// Engine is the topology the servers publish: Aurora (the default) or
	// MultiAZ. The host names are the same for both, as they are on RDS.
	Engine Engine
	// TLS turns TLS on on every server: they present one certificate,
	// signed by a throwaway CA written to Cluster.CAFile. Its DNS names
	// are the cluster endpoint, the reader endpoint and every instance
	// endpoint (as an Aurora instance's certificate names the cluster's
	// endpoints and its own), its common name the first writer's instance
	// endpoint. It lies in each data directory (server.crt, and server.key
	// owned by the server's OS user, mode 0600), TLS is turned on in each
	// server's own configuration file, and a standby made by
	// pg_basebackup, a rejoined old writer too, gets both again. A reader
	// added by [Cluster.AddReader] presents a certificate of its own, from
	// the same CA, that names its instance endpoint too.
	//
	// [Cluster.DSN] and [Cluster.PoolConfig] then ask for
	// sslmode=verify-full&sslrootcert=CAFile for an endpoint name, so a
	// client that reaches a server by another address than its name's (a
	// dial redirected while DNS lags) still verifies that name; an
	// "ip:port" from [Cluster.Addr] keeps sslmode=disable, since the
	// certificate names no address. The simulator's own SQL connections go
	// by address, without TLS; replication and pg_basebackup use it as
	// libpq's default (sslmode=prefer) does.
	TLS bool
}

// Cluster is an Aurora-shaped (or RDS Multi-AZ DB cluster-shaped)
// PostgreSQL cluster on one machine: a writer and 1 to MaxReplicas replicas kept
// in sync by physical streaming replication in synchronous mode, with RDS's
// endpoint names in a fake DNS and the engine's topology functions
// (aurora_replica_status() or rds_tools.show_topology()) on every server.
// [Cluster.Failover] plays a writer failover; [Cluster.AddReader],
// [Cluster.RemoveReader], [Cluster.CrashReader], [Cluster.HangReader] and
// [Cluster.SetLag] change the readers. Close it when done. A Cluster is
// safe for concurrent use; failovers and the changes of readers are
// serialised.
//
// Host names, for cluster "orders":
//
//	cluster (writer) endpoint  orders.cluster-ACCOUNT.REGION.rds.amazonaws.com
//	reader endpoint            orders.cluster-ro-ACCOUNT.REGION.rds.amazonaws.com
//	instance endpoints         orders-1.ACCOUNT.REGION.rds.amazonaws.com (the first writer)
//	                           orders-2.ACCOUNT.REGION.rds.amazonaws.com (the first replica)
//	                           orders-3.ACCOUNT.REGION.rds.amazonaws.com (with Config.Replicas 2)
//	                           … orders-N+1 with Config.Replicas N, then one more per AddReader
type Cluster struct {
	ClusterEndpoint, ReaderEndpoint string
	// Resolver is the fake DNS holding the names; Cache is a client-side
	// cache in front of it with Config.TTL, the LookupFunc PoolConfig uses.
	Resolver *bluegreentest.Resolver
	Cache    *bluegreentest.Cache
	// SingleIP reports that every server listens on 127.0.0.1.
	SingleIP bool
	// CAFile is the path of the CA certificate (PEM) with Config.TLS, ""
	// without: the sslrootcert of [Cluster.DSN].
	CAFile string

	cfg    Config
	domain string // ".ACCOUNT.REGION.rds.amazonaws.com"
	caDir  string // holds CAFile; removed by Close

	failing sync.Mutex // held by Failover and the changes of readers

	rndMu sync.Mutex // guards rnd
	rnd   *rand.Rand // the reader endpoint's choices (Config.Seed)

	ca *certs.Authority // with Config.TLS: issues the certificate of a reader added later

	mu       sync.Mutex
	nodes    []*node // every server in the topology
	writer   *node
	standbys []*node // streaming from writer; fewer while an old writer is down, a reader crashed or hung
	next     int     // index of the next server AddReader makes
}

// Start starts the writer (initdb), the replicas (pg_basebackup from the
// writer, as synchronous standbys), installs the topology functions of
// Config.Engine and publishes the names. ctx bounds the start (a few
// seconds).
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg.Name = cmp.Or(cfg.Name, DefaultName)
	cfg.Account = cmp.Or(cfg.Account, DefaultAccount)
	cfg.Region = cmp.Or(cfg.Region, DefaultRegion)
	cfg.WriterHost = cmp.Or(cfg.WriterHost, DefaultWriterHost)
	cfg.Replicas = cmp.Or(cfg.Replicas, 1)
	if cfg.Replicas < 1 || cfg.Replicas > MaxReplicas {
		return nil, &ConfigError{Field: "Replicas", Value: cfg.Replicas, Want: fmt.Sprintf("1 to %d", MaxReplicas)}
	}
	if len(cfg.ReplicaHosts) == 0 {
		for i := 1; i <= MaxReplicas; i++ {
			cfg.ReplicaHosts = append(cfg.ReplicaHosts, DefaultHost(i))
		}
	}
	if len(cfg.ReplicaHosts) < cfg.Replicas {
		return nil, &ConfigError{Field: "ReplicaHosts", Value: cfg.ReplicaHosts, Want: fmt.Sprintf("at least %d (Replicas)", cfg.Replicas)}
	}
	cfg.TTL = cmp.Or(cfg.TTL, DefaultTTL)
	switch cfg.Engine {
	case "":
		cfg.Engine = Aurora
	case Aurora, MultiAZ:
	default:
		return nil, &ConfigError{Field: "Engine", Value: fmt.Sprintf("%q", cfg.Engine), Want: fmt.Sprintf("%q or %q", Aurora, MultiAZ)}
	}
	tail := cfg.Account + "." + cfg.Region + ".rds.amazonaws.com"
	c := &Cluster{
		ClusterEndpoint: cfg.Name + ".cluster-" + tail,
		ReaderEndpoint:  cfg.Name + ".cluster-ro-" + tail,
		Resolver:        bluegreentest.NewResolver(),
		cfg:             cfg,
		domain:          "." + tail,
	}
	c.Cache = c.Resolver.Cached(cfg.TTL)
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	c.rnd = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	c.Resolver.Pick(c.ReaderEndpoint, func(n int) int {
		c.rndMu.Lock()
		defer c.rndMu.Unlock()
		return c.rnd.IntN(n)
	})
	if err := c.start(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("fakes/failovertest: start: %w", err), c.Close())
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	bin, err := pgtest.BinDir()
	if err != nil {
		return err
	}
	cred, err := pgtest.ServerUser()
	if err != nil {
		return err
	}
	hosts := append([]string{c.cfg.WriterHost}, c.cfg.ReplicaHosts[:c.cfg.Replicas]...)
	for _, h := range hosts {
		if pgnode.CanBind(h) != nil {
			c.SingleIP = true
		}
	}
	for i := range hosts {
		if c.SingleIP {
			hosts[i] = "127.0.0.1"
		}
		c.nodes = append(c.nodes, newNode(fmt.Sprintf("%s-%d", c.cfg.Name, i+1), resourceID(c.cfg, i), hosts[i], bin, cred))
	}
	if c.cfg.TLS {
		if err := c.makeCert(); err != nil {
			return fmt.Errorf("TLS certificate: %w", err)
		}
	}
	w := c.nodes[0]

	// The first writer: pgtest's initdb and start, then our configuration
	// (with TLS, once the certificate is in its data directory), trusting
	// replication from any loopback address.
	if err := w.StartPrimary(ctx); err != nil {
		if w.PG == nil {
			c.nodes = nil
		}
		return err
	}
	install, what := installSQL+installAurora, "aurora_replica_status"
	if c.cfg.Engine == MultiAZ {
		install, what = installSQL+installMultiAZ, "rds_tools"
	}
	if err := w.Exec(ctx, install); err != nil {
		return fmt.Errorf("install %s: %w", what, err)
	}

	// The replicas: their own directories, owned by the server's user.
	// pg_basebackup runs in parallel: each backup is non-exclusive, with
	// replication connections of its own (max_wal_senders has room for
	// two per backup and one per standby); one replica is made on this
	// goroutine, as before.
	replicas := c.nodes[1:]
	if len(replicas) == 1 {
		if err := pgnode.MakeStandby(ctx, replicas[0].Node, w.Node); err != nil {
			return err
		}
	} else {
		errs := make([]error, len(replicas))
		var wg sync.WaitGroup
		for i, r := range replicas {
			wg.Go(func() { errs[i] = pgnode.MakeStandby(ctx, r.Node, w.Node) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	c.writer, c.standbys, c.next = w, append([]*node(nil), replicas...), len(c.nodes)
	if err := w.SetSync(ctx, true); err != nil {
		return err
	}
	if err := pgnode.WaitSync(ctx, w.Node, len(c.standbys)); err != nil {
		return err
	}
	if err := c.publishTopology(ctx); err != nil {
		return err
	}
	c.setDNS(w, c.standbys)
	for _, n := range c.nodes {
		c.Resolver.Set(c.InstanceEndpoint(n.ID), n.Addr())
	}
	return nil
}

// installSQL creates the control table behind the topology functions of
// both engines: one row per server, the writer's with session_id
// MASTER_SESSION_ID. The table is written on the writer and reaches the
// standbys by physical replication, as every row does: a standby is
// read-only, but it reads it. A server's own ids are not replicated data:
// they are the settings holdfast.server_id and holdfast.dbi_resource_id, in
// each server's own configuration file.
const installSQL = `
CREATE SCHEMA IF NOT EXISTS holdfast_failover;
CREATE TABLE IF NOT EXISTS holdfast_failover.replica_status (
	server_id             text PRIMARY KEY,
	session_id            text NOT NULL,
	last_update_timestamp timestamptz NOT NULL DEFAULT now(),
	replica_lag_in_msec   real,
	dbi_resource_id       text NOT NULL UNIQUE,
	endpoint              text NOT NULL,
	port                  integer NOT NULL,
	-- a Global's servers only: what aurora_global_db_instance_status() shows
	aws_region            text,
	durable_lsn           bigint,
	highest_lsn_rcvd      bigint,
	feedback_epoch        bigint,
	feedback_xmin         bigint,
	oldest_read_view_lsn  bigint
);
`

// installAurora creates aurora_replica_status() and
// aurora_db_instance_identifier() (Engine Aurora). A Global's server lists
// the servers of its own Region only (the setting holdfast.aws_region);
// the others, which have no Region, list every row.
const installAurora = `
CREATE OR REPLACE FUNCTION pg_catalog.aurora_replica_status()
RETURNS TABLE (server_id text, session_id text, last_update_timestamp timestamptz, replica_lag_in_msec real, cpu real)
LANGUAGE sql STABLE AS $fn$
	SELECT r.server_id, r.session_id, r.last_update_timestamp, r.replica_lag_in_msec, 1.0::real
	FROM holdfast_failover.replica_status r
	WHERE r.aws_region IS NOT DISTINCT FROM nullif(current_setting('holdfast.aws_region', true), '')
	ORDER BY r.server_id
$fn$;
CREATE OR REPLACE FUNCTION pg_catalog.aurora_db_instance_identifier()
RETURNS text LANGUAGE sql STABLE AS $fn$ SELECT current_setting('holdfast.server_id', true) $fn$;
`

// installMultiAZ creates the schema rds_tools of an RDS Multi-AZ DB cluster
// (Engine MultiAZ), in the shapes the AWS wrappers read:
//
//   - show_topology(client text DEFAULT NULL): id (the dbi resource id),
//     endpoint (the instance endpoint) and port, one row per server. The
//     JDBC wrapper passes a client name, the Go wrapper none.
//   - dbi_resource_id(): the server's own dbi resource id.
//   - multi_az_db_cluster_source_dbi_resource_id(): the writer's dbi
//     resource id, as a set of one row, or of none on the writer itself.
const installMultiAZ = `
CREATE SCHEMA IF NOT EXISTS rds_tools;
GRANT USAGE ON SCHEMA rds_tools TO PUBLIC;
CREATE OR REPLACE FUNCTION rds_tools.show_topology(client text DEFAULT NULL)
RETURNS TABLE (id text, endpoint text, port integer)
LANGUAGE sql STABLE AS $fn$
	SELECT r.dbi_resource_id, r.endpoint, r.port FROM holdfast_failover.replica_status r ORDER BY r.server_id
$fn$;
CREATE OR REPLACE FUNCTION rds_tools.dbi_resource_id()
RETURNS text LANGUAGE sql STABLE AS $fn$ SELECT current_setting('holdfast.dbi_resource_id', true) $fn$;
CREATE OR REPLACE FUNCTION rds_tools.multi_az_db_cluster_source_dbi_resource_id()
RETURNS SETOF text LANGUAGE sql STABLE AS $fn$
	SELECT r.dbi_resource_id FROM holdfast_failover.replica_status r
	WHERE r.session_id = 'MASTER_SESSION_ID'
	AND r.dbi_resource_id IS DISTINCT FROM current_setting('holdfast.dbi_resource_id', true)
$fn$;
`

// resourceID returns the dbi resource id of the server with index i (0
// the first writer): "db-" and 26 characters of base32, as RDS shows them,
// derived from the cluster's names so that a run is reproducible.
func resourceID(cfg Config, i int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%s/%d", cfg.Account, cfg.Region, cfg.Name, i))
	return "db-" + base32.StdEncoding.EncodeToString(sum[:])[:26]
}

// publishTopology rewrites the control table on the writer: the writer's
// row with MASTER_SESSION_ID, every other server with a session id of its
// own (the old writer's too while it is down: Aurora lists it as it comes
// back as a reader), each with its dbi resource id and instance endpoint.
// It returns once every standby has replayed the change, so that every
// running server names the same writer.
func (c *Cluster) publishTopology(ctx context.Context) error {
	c.mu.Lock()
	w, nodes, standbys := c.writer, append([]*node(nil), c.nodes...), append([]*node(nil), c.standbys...)
	lags := map[*node]time.Duration{}
	for _, n := range nodes {
		lags[n] = n.lag
	}
	c.mu.Unlock()
	rows := make([]statusRow, 0, len(nodes))
	for i, n := range nodes {
		r := statusRow{id: n.ID, session: WriterSessionID, resourceID: n.resourceID, endpoint: c.InstanceEndpoint(n.ID)}
		if n != w {
			r.session, r.lag = fmt.Sprintf("5f0c0c1e-%04d-4000-8000-%012d", i, time.Now().UnixNano()%1e12), float32(lags[n].Milliseconds())
		}
		rows = append(rows, r)
	}
	var wait []*node
	for _, s := range standbys {
		if lags[s] == 0 { // a lagging one applies the change lags[s] late, as a lagging reader would
			wait = append(wait, s)
		}
	}
	return writeStatus(ctx, w, rows, nil, wait)
}

// statusRow is one row of the control table holdfast_failover.replica_status.
type statusRow struct {
	id, session          string
	lag                  any // replica_lag_in_msec (a float32), nil for the writer
	resourceID, endpoint string
	// A Global's server's Region and replication
	// (aurora_global_db_instance_status()); nil for a Cluster's.
	region, durable, received, epoch, xmin, readView any
}

// writeStatus replaces the rows of the control tables on the writer w in
// one transaction: replica_status with rows and, with regions (a Global's
// rows of holdfast_failover.global_status, in its columns' order),
// global_status. It then waits until each of wait has replayed the
// change.
func writeStatus(ctx context.Context, w *node, rows []statusRow, regions [][]any, wait []*node) error {
	conn, err := pgx.Connect(ctx, w.DSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	lsn, err := writeRows(ctx, conn, rows, regions)
	if err != nil {
		return err
	}
	for _, s := range wait {
		if err := pgnode.WaitReplayed(ctx, s.Node, lsn); err != nil {
			return fmt.Errorf("%s replaying the topology: %w", s.ID, err)
		}
	}
	return nil
}

// writeRows is writeStatus's transaction on conn; it returns the writer's
// WAL position after it.
func writeRows(ctx context.Context, conn *pgx.Conn, rows []statusRow, regions [][]any) (string, error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("DELETE FROM holdfast_failover.replica_status")
	for _, r := range rows {
		b.Queue(`INSERT INTO holdfast_failover.replica_status (server_id, session_id, replica_lag_in_msec,
			dbi_resource_id, endpoint, port, aws_region, durable_lsn, highest_lsn_rcvd, feedback_epoch, feedback_xmin,
			oldest_read_view_lsn) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			r.id, r.session, r.lag, r.resourceID, r.endpoint, TopologyPort, r.region, r.durable, r.received, r.epoch, r.xmin, r.readView)
	}
	if regions != nil {
		b.Queue("DELETE FROM holdfast_failover.global_status")
		for _, r := range regions {
			b.Queue("INSERT INTO holdfast_failover.global_status VALUES ($1, $2, $3, $4, $5, $6, $7)", r...)
		}
	}
	b.Queue("COMMIT")
	var lsn string
	b.Queue("SELECT pg_current_wal_lsn()::text").QueryRow(func(row pgx.Row) error { return row.Scan(&lsn) })
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		_, _ = conn.Exec(context.Background(), "ROLLBACK")
		return "", err
	}
	return lsn, nil
}

// setDNS points the cluster endpoint at writer and the reader endpoint at
// the standbys and the readers that crashed or hung (still in the
// topology, not yet detected), or at the writer when there is none (as
// Aurora does). Each lookup of the reader endpoint answers one of them at
// random (Resolver.Pick, set by Start).
func (c *Cluster) setDNS(writer *node, standbys []*node) {
	c.Resolver.Set(c.ClusterEndpoint, writer.Addr())
	var addrs []string
	for _, s := range standbys {
		addrs = append(addrs, s.Addr())
	}
	c.mu.Lock()
	for _, n := range c.nodes {
		if (n.crashed || n.hung) && n != writer && !slices.Contains(standbys, n) {
			addrs = append(addrs, n.Addr())
		}
	}
	c.mu.Unlock()
	if len(addrs) == 0 {
		addrs = []string{writer.Addr()}
	}
	c.Resolver.Set(c.ReaderEndpoint, addrs...)
}

// InstanceEndpoint returns the instance endpoint of server id ("orders-1").
func (c *Cluster) InstanceEndpoint(id string) string { return id + c.domain }

// ServerIDs returns the ids of the servers, the first writer first.
func (c *Cluster) ServerIDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.ID)
	}
	return out
}

// Writer returns the server id of the writer now (the simulator's truth,
// not the DNS's).
func (c *Cluster) Writer() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writer.ID
}

// ResourceID returns the dbi resource id of server id, what
// rds_tools.dbi_resource_id() returns there ("" for an unknown id).
func (c *Cluster) ResourceID(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.ID == id {
			return n.resourceID
		}
	}
	return ""
}

// Engine returns the topology the servers publish (Config.Engine).
func (c *Cluster) Engine() Engine { return c.cfg.Engine }

// Addr returns where server id listens, "ip:port" ("" for an unknown id).
func (c *Cluster) Addr(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.ID == id {
			return n.Addr()
		}
	}
	return ""
}

// DSN returns a superuser connection string for host (an endpoint name,
// resolved through [Cluster.Cache] by PoolConfig, or an "ip:port" from
// [Cluster.Addr]), database postgres. Without Config.TLS it has
// sslmode=disable. With it, an endpoint name gets
// sslmode=verify-full&sslrootcert=CAFile: the server's certificate must
// be signed by the cluster's CA and name host. An IP address (from Addr)
// keeps sslmode=disable: the certificate names no address, so an IP
// cannot be verified. extra are more "key=value" settings.
func (c *Cluster) DSN(host string, extra ...string) string {
	return pgurl.Endpoint(host, TopologyPort, c.CAFile, extra...) // the resolver answers the port
}

// PoolConfig parses c.DSN(host, extra...) and sets its LookupFunc to
// c.Cache.Lookup, so that the pool sees DNS changes up to Config.TTL late.
// With Config.TLS and an endpoint name, its TLS configuration verifies
// that name whatever address the name resolves (or a dial is sent) to.
func (c *Cluster) PoolConfig(host string, extra ...string) (*pgxpool.Config, error) {
	return pgurl.PoolConfig(c.DSN(host, extra...), c.Cache.Lookup)
}

// CommittedIDs returns the ids in column id of table (in database
// postgres) on the writer, sorted: the audit of acknowledged writes after
// a failover. table is an SQL identifier, used as given.
func (c *Cluster) CommittedIDs(ctx context.Context, table string) ([]int64, error) {
	c.mu.Lock()
	w := c.writer
	c.mu.Unlock()
	return committedIDs(ctx, w, table)
}

// committedIDs returns the ids of table on the writer w, its error naming
// the package.
func committedIDs(ctx context.Context, w *node, table string) ([]int64, error) {
	ids, err := w.IDs(ctx, table)
	if err != nil {
		return nil, fmt.Errorf("fakes/failovertest: %w", err)
	}
	return ids, nil
}

// Replica is one row of the topology a server publishes:
// aurora_replica_status() (Engine Aurora) or rds_tools.show_topology()
// (Engine MultiAZ).
type Replica struct {
	ServerID  string
	Writer    bool   // the server names it the writer
	SessionID string // Aurora: WriterSessionID for the writer
	Updated   time.Time
	// Lag is replica_lag_in_msec (Aurora; 0 for the writer, whose is
	// NULL, and with MultiAZ, whose topology has no lag column).
	Lag time.Duration
	// MultiAZ: the dbi resource id and instance endpoint show_topology()
	// lists; empty with Aurora.
	ResourceID, Endpoint string
}

// multiAZTopologyQuery reads show_topology() and marks the writer as the
// AWS wrappers do: the source id, or the server's own id when it has none.
const multiAZTopologyQuery = `SELECT split_part(t.endpoint, '.', 1), t.id = coalesce(
	(SELECT multi_az_db_cluster_source_dbi_resource_id FROM rds_tools.multi_az_db_cluster_source_dbi_resource_id() LIMIT 1),
	rds_tools.dbi_resource_id()), t.id, t.endpoint
	FROM rds_tools.show_topology('holdfast-failovertest') t`

// Topology returns the topology as server id reports it:
// aurora_replica_status() with Engine Aurora, rds_tools.show_topology()
// with Engine MultiAZ.
func (c *Cluster) Topology(ctx context.Context, id string) ([]Replica, error) {
	addr := c.Addr(id)
	if addr == "" {
		return nil, fmt.Errorf("fakes/failovertest: no server %q", id)
	}
	conn, err := pgx.Connect(ctx, c.DSN(addr, "connect_timeout=5"))
	if err != nil {
		return nil, fmt.Errorf("fakes/failovertest: %s: %w", id, err)
	}
	defer conn.Close(context.Background())
	query, scan := "SELECT server_id, session_id, last_update_timestamp, coalesce(replica_lag_in_msec, 0)::float8 FROM aurora_replica_status()",
		func(r pgx.CollectableRow) (Replica, error) {
			var x Replica
			var lag float64
			err := r.Scan(&x.ServerID, &x.SessionID, &x.Updated, &lag)
			x.Writer = x.SessionID == WriterSessionID
			x.Lag = time.Duration(lag * float64(time.Millisecond))
			return x, err
		}
	if c.cfg.Engine == MultiAZ {
		query, scan = multiAZTopologyQuery, func(r pgx.CollectableRow) (Replica, error) {
			var x Replica
			return x, r.Scan(&x.ServerID, &x.Writer, &x.ResourceID, &x.Endpoint)
		}
	}
	rows, err := conn.Query(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("fakes/failovertest: %s: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("fakes/failovertest: %s: %w", id, err)
	}
	return out, nil
}

// Close stops the servers and removes their directories.
func (c *Cluster) Close() error {
	c.mu.Lock()
	nodes := c.nodes
	c.nodes = nil
	c.mu.Unlock()
	return removeAll(nodes, c.caDir)
}

// removeAll stops the servers nodes and removes their directories, in
// parallel, then the directory caDir ("": none).
func removeAll(nodes []*node, caDir string) error {
	pn := make([]*pgnode.Node, len(nodes))
	for i, n := range nodes {
		pn[i] = n.Node
	}
	err := pgnode.RemoveAll(pn)
	if caDir != "" {
		err = errors.Join(err, os.RemoveAll(caDir))
	}
	return err
}
