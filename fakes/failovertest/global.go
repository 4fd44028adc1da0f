package failovertest

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/holdfast-db/holdfast/fakes/bluegreentest"
	"github.com/holdfast-db/holdfast/fakes/internal/certs"
	"github.com/holdfast-db/holdfast/fakes/internal/pgnode"
	"github.com/holdfast-db/holdfast/fakes/internal/pgurl"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// GlobalConfig configures [StartGlobal]. The zero value is a global
// cluster "orders" of DefaultAccount with its primary Region in
// DefaultRegion and its secondary in DefaultSecondaryRegion, one reader in
// each Region, DefaultGlobalLag between them and a client-side DNS cache
// of DefaultTTL.
type GlobalConfig struct {
	// Name is the global cluster's identifier and each Region's cluster's;
	// the servers are NAME-1, NAME-2, … across both Regions (instance
	// identifiers are unique across the Regions of a global cluster).
	// Account makes, with each Region's name, the Region's hash.
	Name, Account string
	// Regions are the primary Region's name and the secondary's
	// (defaults DefaultRegion and DefaultSecondaryRegion); they must
	// differ.
	Regions [2]string
	// Readers is the number of readers of each Region's cluster besides
	// its first server (the primary's writer, the secondary's server that
	// a promotion makes the writer): 1 (the default) to 3.
	Readers int
	// Lag is how late what the writer writes reaches the secondary Region
	// (default DefaultGlobalLag; negative: no delay beyond the servers'
	// own); [Global.SetLag] changes it.
	Lag time.Duration
	// Seed seeds each reader endpoint's random choice, as Config.Seed.
	Seed uint64
	// TTL is the client-side DNS cache's TTL ([Global.Cache]); negative
	// caches nothing. Default DefaultTTL.
	TTL time.Duration
	// TLS turns TLS on on every server: each Region's servers present a
	// certificate, from one throwaway CA (Global.CAFile), naming the
	// global writer endpoint and their own Region's endpoints only, and
	// [Global.DSN] verifies endpoint names (sslmode=verify-full).
	TLS bool
}

// maxGlobalReaders is the largest GlobalConfig.Readers.
const maxGlobalReaders = 3

// GlobalRegion is one Region of a [Global]: its names and servers.
type GlobalRegion struct {
	Name string // "us-east-1"
	// Hash is the account's label in the Region's names: Aurora's differs
	// from one Region to the other for one account.
	Hash                            string
	ClusterEndpoint, ReaderEndpoint string
	// Servers are the instance identifiers of the Region's cluster; the
	// first is the one its cluster endpoint leads to, the writer when the
	// Region is the primary, the server a promotion makes the writer when
	// it is the secondary.
	Servers []string
}

// Global is an Aurora Global Database of two Regions on one machine, with
// real PostgreSQL servers, for tests and demos of routing across Regions
// with plain pgxpool as the control. Close it when done; it is safe for
// concurrent use, and its operations are serialised.
//
// # Model
//
// Each Region is a cluster of 1+GlobalConfig.Readers servers, NAME-1,
// NAME-2, … numbered across both Regions, at [DefaultHost]'s addresses
// (the primary Region's first). The primary Region's writer (initdb) and
// its readers stream as a [Cluster]'s do, synchronously: a commit waits
// until one reader of its own Region flushed it. The secondary Region's
// servers are base backups of the writer, made in parallel; its first
// server streams from the writer asynchronously, through a relay in the
// test process (the link between the Regions) that holds what the writer
// sends back GlobalConfig.Lag ([Global.SetLag] changes it), and its
// readers stream from it (cascading). So a commit acknowledged by the
// primary reaches the secondary Lag later, and the writer's
// pg_stat_replication measures that lag. The link holds back the WAL
// only: the connection's start and the standby's replies pass at once.
//
// # Status
//
// Every server has Aurora's functions, in pg_catalog and owned by the
// superuser: aurora_db_instance_identifier(); aurora_replica_status(),
// listing its own Region's servers only (none the writer in the secondary
// Region, which has no writer); and the global ones:
//
//   - aurora_global_db_instance_status(): server_id, session_id
//     (MASTER_SESSION_ID for the writer, first), aws_region, durable_lsn
//     (the WAL its Region's cluster flushed: the writer's, or the
//     secondary's first server's), highest_lsn_rcvd (the WAL the server
//     received), feedback_epoch and feedback_xmin (its hot standby
//     feedback), oldest_read_view_lsn (the WAL it replayed),
//     visibility_lag_in_msec (its replay lag behind the writer, a
//     cascading reader's upstream's included). The writer's figures are
//     NULL but for durable_lsn. A server that is down has no row.
//   - aurora_global_db_status(): a row per Region, the primary's first
//     with highest_lsn_written the writer's WAL, durability_lag_in_msec
//     and rpo_lag_in_msec -1, last_lag_calculation_time 1970-01-01;
//     the secondary's with the WAL it flushed, durability_lag_in_msec the
//     writer's write_lag for it, rpo_lag_in_msec its flush_lag (the time
//     a commit takes to be stored there), last_lag_calculation_time the
//     measure's time. While the secondary does not stream, both lags grow
//     with the time since it last did; while its servers are down, its
//     row is NULL but for aws_region.
//
// LSNs are bigints (pg_lsn minus '0/0'). The simulator measures every
// 200 ms, as Aurora calculates its lags periodically, and writes the
// rows into control tables on the writer, which reach every server by
// physical replication: the secondary Region sees them Lag late. Each
// server's settings include rds.extensions (aurora_stat_utils), which SHOW
// answers.
//
// # Names
//
// Each Region's names carry the Region and a hash of its own (Aurora's
// differs per Region for one account; here derived from GlobalConfig's
// Account and the Region, [GlobalRegion].Hash):
//
//	cluster endpoint   NAME.cluster-HASH.REGION.rds.amazonaws.com    CNAME of its first server's instance endpoint
//	reader endpoint    NAME.cluster-ro-HASH.REGION.rds.amazonaws.com one reader at random per lookup
//	instance endpoint  NAME-N.HASH.REGION.rds.amazonaws.com          the server's address
//	global writer      NAME.global-ID.global.rds.amazonaws.com       CNAME of the writer Region's cluster endpoint
//
// The secondary's cluster endpoint is inactive, as on Aurora: it leads to
// a standby, whose writes fail with 25006. Its reader endpoint answers
// any of its servers, all readers.
//
// What a client can learn is what it could on AWS. The DNS answers the
// chain: [bluegreentest.Resolver.CNAME] one step (a CNAME query's
// answer: the global writer endpoint's is the writer Region's cluster
// endpoint), [bluegreentest.Resolver.LookupCNAME] its end as
// net.Resolver.LookupCNAME does (the writer's instance endpoint, whose
// labels name the writer, the Region's hash and the Region), and the
// status functions name every server and its Region. So the writer
// Region's names can be derived. The secondary Region's hash cannot:
// neither SQL, nor the global endpoint's chain, nor the certificates
// (with TLS each Region's servers name the global endpoint and their own
// Region's names only) tell it. A client learns it from its configuration
// (a host pattern, or the Region's endpoint it was given) or once the
// writer has moved there.
//
// # Operations
//
// [Global.Switchover] plays SwitchoverGlobalCluster, with no data loss:
//
//  1. EventWritesBlocked: the writer refuses writes
//     (default_transaction_read_only: clients get 25006).
//  2. EventSynced: the secondary's first server has replayed all it wrote.
//  3. EventWriterDown: the writer shut down (fast: 57P01), once its last
//     WAL reached the secondary.
//  4. EventPromoted: the secondary's first server takes writes, its
//     Region's readers synchronous.
//  5. EventDemoted: the old writer restarts as a standby of the new one,
//     through the link (read-only: 25006), its readers following it.
//  6. EventTopology: every server's status names the new writer; the
//     reader endpoints follow the new roles.
//  7. EventDNS: GlobalScenario.DNSLag after the promotion, the global
//     writer endpoint is a CNAME of the new primary Region's cluster
//     endpoint.
//
// [Global.Failover] plays FailoverGlobalCluster --allow-data-loss: the
// secondary's last rpo_lag_in_msec is kept (GlobalResult.RPOLag); the link
// is cut, dropping what it held, and the primary Region's servers crash
// (EventRegionDown); Detect later the secondary's first server is
// promoted without waiting (EventPromoted), then EventTopology and
// EventDNS as above. The commits the secondary had not received are
// lost: with GlobalScenario.Audit, GlobalResult.Lost lists them, read
// from the old writer's data directory (started with no TCP listener, as
// Aurora keeps the old primary's data for recovery). With Rejoin the old
// Region comes back as the secondary (a base backup of the new writer per
// server; EventDemoted).
//
// A plain pgxpool on the global writer endpoint bites as on Aurora: after
// a switchover its connections, made again while its cached DNS answer
// still led to the old writer, stay there and fail with 25006 after the
// DNS moved, until the pool is reset; after a failover its writes fail
// until the DNS moves and its cache expires.
//
// Measured on two shared cores under a load of 12 to 17 (other
// engineers' tests), GlobalConfig{Lag: 300 ms, TTL: 500 ms, TLS: true}
// (TestGlobal): a start takes 11 to 18 s (initdb, then three base backups
// in parallel). A switchover with DNSLag 500 ms blocks writes at 0.14 to
// 0.24 s, is synchronized at 0.4 s, promotes at 1.5 to 1.8 s (the
// writer's shutdown waits for the secondary's flush, Lag away), has the
// old Region demoted at 2.5 to 3.2 s and moves the DNS at 3.6 to 4.5 s,
// once every server replayed the new status. A failover with Lag 600 ms,
// Detect 200 ms and DNSLag 500 ms is down at 0.2 to 0.4 s, promotes at
// 0.7 to 1.5 s, moves the DNS at 1.2 to 2.2 s and has the old Region back
// at 4.8 to 9.8 s (the audit and two base backups), having lost the
// acknowledged writes of the last 600 ms (59 at one every 10 ms).
// TestGlobal, the three on one start, takes 24 to 37 s there.
//
// # Limits
//
//   - Two Regions (Aurora has up to five secondaries), 1 to 3 readers
//     each; no headless secondary, write forwarding or rds.global_db_rpo.
//     A Global has no AddReader, SetLag per reader or crash of one reader.
//   - The lag is one way and constant (what the writer sends is held
//     Lag), not a cross-Region round trip; the link runs in the test
//     process. The status is measured every 200 ms.
//   - A switchover's block is default_transaction_read_only: a
//     transaction already open, or one that turns it off, still writes
//     until the shutdown, and still reaches the secondary. The writer's
//     connections end at the shutdown (57P01), as an Aurora restart ends
//     them.
//   - Detect is a wait: nothing detects the outage. Rejoin re-creates the
//     old Region's servers; it keeps no snapshot of them.
//   - While the old Region is down, its servers have no row in
//     aurora_global_db_instance_status() and its cluster's row in
//     aurora_global_db_status() is NULL: what Aurora shows then is not
//     documented.
//   - The DNS moves DNSLag after the promotion, but not before every
//     running server has replayed the new status (the secondary Region's
//     Lag later).
//   - rds.extensions is a placeholder setting: pg_settings does not list
//     it (the AWS wrappers read it there).
//   - No IAM (trust authentication), no client certificates; the reader
//     endpoints answer addresses, not CNAMEs; the simulator's own
//     connections go by address.
type Global struct {
	// GlobalEndpoint is the global writer endpoint,
	// NAME.global-ID.global.rds.amazonaws.com: a CNAME of the writer
	// Region's cluster endpoint.
	GlobalEndpoint string
	// Resolver is the fake DNS holding every name; Cache is a client-side
	// cache in front of it with GlobalConfig.TTL, the LookupFunc
	// PoolConfig uses.
	Resolver *bluegreentest.Resolver
	Cache    *bluegreentest.Cache
	// SingleIP reports that every server listens on 127.0.0.1.
	SingleIP bool
	// CAFile is the path of the CA certificate (PEM) with GlobalConfig.TLS,
	// "" without.
	CAFile string

	cfg     GlobalConfig
	regions [2]*region
	nodes   []*node // every server, the first writer first; fixed after start
	link    *wan    // the secondary's replication from the writer
	caDir   string

	rndMu sync.Mutex
	rnd   *rand.Rand

	op sync.Mutex // held by the operations; the monitor skips a sample meanwhile

	mu      sync.Mutex
	writer  *node
	primary int // the writer's Region, an index in regions
	gen     int // the session ids' generation, one per change of writer
	lag     secondaryLag
	closed  bool

	stopMonitor context.CancelFunc // called by Close
	wg          sync.WaitGroup
}

// region is one Region's cluster.
type region struct {
	GlobalRegion
	nodes []*node // the first is its cluster endpoint's
}

// StartGlobal starts a global cluster: the primary Region's writer
// (initdb), then, in parallel, the primary Region's readers and the
// secondary Region's servers (pg_basebackup from the writer), the status
// functions, the names, and the lag monitor. ctx bounds the start.
func StartGlobal(ctx context.Context, cfg GlobalConfig) (*Global, error) {
	cfg.Name = cmp.Or(cfg.Name, DefaultName)
	cfg.Account = cmp.Or(cfg.Account, DefaultAccount)
	cfg.Regions[0] = cmp.Or(cfg.Regions[0], DefaultRegion)
	cfg.Regions[1] = cmp.Or(cfg.Regions[1], DefaultSecondaryRegion)
	if cfg.Regions[0] == cfg.Regions[1] {
		return nil, &ConfigError{Field: "Regions", Value: cfg.Regions, Want: "two different Regions"}
	}
	cfg.Readers = cmp.Or(cfg.Readers, 1)
	if cfg.Readers < 1 || cfg.Readers > maxGlobalReaders {
		return nil, &ConfigError{Field: "Readers", Value: cfg.Readers, Want: fmt.Sprintf("1 to %d", maxGlobalReaders)}
	}
	cfg.Lag = cmp.Or(cfg.Lag, DefaultGlobalLag)
	cfg.Lag = max(cfg.Lag, 0)
	cfg.TTL = cmp.Or(cfg.TTL, DefaultTTL)
	g := &Global{
		GlobalEndpoint: cfg.Name + ".global-" + hash12(cfg.Account+"/global/"+cfg.Name) + ".global.rds.amazonaws.com",
		Resolver:       bluegreentest.NewResolver(),
		cfg:            cfg,
	}
	g.Cache = g.Resolver.Cached(cfg.TTL)
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	g.rnd = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	pick := func(n int) int {
		g.rndMu.Lock()
		defer g.rndMu.Unlock()
		return g.rnd.IntN(n)
	}
	for i, name := range cfg.Regions {
		h := hash12(cfg.Account + "/" + name)
		tail := h + "." + name + ".rds.amazonaws.com"
		r := &region{GlobalRegion: GlobalRegion{Name: name, Hash: h,
			ClusterEndpoint: cfg.Name + ".cluster-" + tail, ReaderEndpoint: cfg.Name + ".cluster-ro-" + tail}}
		g.regions[i] = r
		g.Resolver.Pick(r.ReaderEndpoint, pick)
	}
	if err := g.start(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("fakes/failovertest: start a global cluster: %w", err), g.Close())
	}
	return g, nil
}

// hash12 returns 12 lowercase letters and digits derived from s, the
// shape of an RDS hash or id in a host name, reproducible from a run's
// names.
func hash12(s string) string {
	sum := sha256.Sum256([]byte(s))
	return strings.ToLower(base32.StdEncoding.EncodeToString(sum[:]))[:12]
}

func (g *Global) start(ctx context.Context) error {
	bin, err := pgtest.BinDir()
	if err != nil {
		return err
	}
	cred, err := pgtest.ServerUser()
	if err != nil {
		return err
	}
	per := 1 + g.cfg.Readers
	hosts := make([]string, 2*per)
	for i := range hosts {
		hosts[i] = DefaultHost(i)
		if pgnode.CanBind(hosts[i]) != nil {
			g.SingleIP = true
		}
	}
	for i, r := range g.regions {
		var ids []string
		for j := range per {
			ids = append(ids, fmt.Sprintf("%s-%d", g.cfg.Name, i*per+j+1))
		}
		r.Servers = ids
		for j, id := range ids {
			k := i*per + j
			host := hosts[k]
			if g.SingleIP {
				host = "127.0.0.1"
			}
			n := newNode(id, resourceID(Config{Name: g.cfg.Name, Account: g.cfg.Account, Region: r.Name}, k), host, bin, cred)
			n.region = r.Name
			for _, p := range ids {
				if p != id {
					n.peers = append(n.peers, p)
				}
			}
			r.nodes = append(r.nodes, n)
			g.nodes = append(g.nodes, n)
		}
	}
	if g.cfg.TLS {
		if err := g.makeCerts(); err != nil {
			return fmt.Errorf("TLS certificates: %w", err)
		}
	}
	primary, secondary := g.regions[0], g.regions[1]
	w, head := primary.nodes[0], secondary.nodes[0]
	if err := w.StartPrimary(ctx); err != nil {
		if w.PG == nil {
			g.nodes = nil // nothing to stop or remove
		}
		return err
	}
	if err := w.Exec(ctx, installSQL+installAurora+installGlobal); err != nil {
		return fmt.Errorf("install the status functions: %w", err)
	}
	if g.link, err = newWAN(w.Addr(), g.cfg.Lag); err != nil {
		return err
	}
	// Every other server is a base backup of the writer, made in
	// parallel; then the secondary's first server streams through the
	// link, and the secondary's readers from it (cascading), as a
	// secondary Region's instances read their Region's copy.
	others := g.nodes[1:]
	errs := make([]error, len(others))
	var wg sync.WaitGroup
	for i, n := range others {
		wg.Go(func() { errs[i] = pgnode.MakeStandby(ctx, n.Node, w.Node) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := head.Follow(ctx, g.link.node(), true); err != nil {
		return err
	}
	for _, n := range secondary.nodes[1:] {
		if err := n.Follow(ctx, head.Node, true); err != nil {
			return err
		}
	}
	g.writer, g.primary = w, 0
	if err := w.SetSync(ctx, true); err != nil {
		return err
	}
	if err := g.waitStreams(ctx, w, primary, secondary); err != nil {
		return err
	}
	if err := g.status(ctx, conns{}, true); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	for _, n := range g.nodes {
		g.Resolver.Set(g.InstanceEndpoint(n.ID), n.Addr())
	}
	for _, r := range g.regions {
		g.Resolver.Alias(r.ClusterEndpoint, g.InstanceEndpoint(r.nodes[0].ID))
	}
	g.setReaderDNS()
	g.Resolver.Alias(g.GlobalEndpoint, primary.ClusterEndpoint)
	ctx, g.stopMonitor = context.WithCancel(context.Background())
	g.wg.Go(func() { g.monitor(ctx) })
	return nil
}

// waitStreams waits until the writer w streams to its Region's readers
// (synchronous) and to the secondary's first server (through the link),
// and that one to the secondary's readers.
func (g *Global) waitStreams(ctx context.Context, w *node, primary, secondary *region) error {
	if err := pgnode.WaitSync(ctx, w.Node, len(primary.nodes)-1); err != nil {
		return fmt.Errorf("%s's readers: %w", primary.Name, err)
	}
	head := secondary.nodes[0]
	if err := pgnode.WaitStreaming(ctx, w.Node, head.ID); err != nil {
		return fmt.Errorf("%s streaming from %s: %w", head.ID, w.ID, err)
	}
	if err := pgnode.WaitStreaming(ctx, head.Node, ids(secondary.nodes[1:])...); err != nil {
		return fmt.Errorf("%s's readers streaming from %s: %w", secondary.Name, head.ID, err)
	}
	return nil
}

func ids(nodes []*node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	return out
}

// makeCerts makes the CA, writes it to CAFile, and gives each Region's
// servers a certificate naming the global writer endpoint, the Region's
// cluster and reader endpoints and its instance endpoints: nothing of the
// other Region, as on Aurora.
func (g *Global) makeCerts() error {
	ca, err := certs.New()
	if err != nil {
		return err
	}
	if g.caDir, g.CAFile, err = ca.WriteTemp("holdfast-global-ca-*"); err != nil {
		return err
	}
	for _, r := range g.regions {
		names := []string{g.GlobalEndpoint, r.ClusterEndpoint, r.ReaderEndpoint}
		for _, n := range r.nodes {
			names = append(names, g.InstanceEndpoint(n.ID))
		}
		certPEM, keyPEM, err := ca.Issue(names[3], names)
		if err != nil {
			return err
		}
		for _, n := range r.nodes {
			n.Cert = &pgnode.Cert{CertPEM: certPEM, KeyPEM: keyPEM}
		}
	}
	return nil
}

// setReaderDNS points each Region's reader endpoint at its readers: the
// primary Region's servers but its writer (the writer when it has none
// running), every server of the secondary Region, all of its instances
// being readers. Each lookup answers one of them at random.
func (g *Global) setReaderDNS() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, r := range g.regions {
		var addrs []string
		for _, n := range r.nodes {
			if n != g.writer && !n.crashed {
				addrs = append(addrs, n.Addr())
			}
		}
		if i == g.primary && len(addrs) == 0 {
			addrs = []string{g.writer.Addr()}
		}
		if len(addrs) > 0 {
			g.Resolver.Set(r.ReaderEndpoint, addrs...)
		}
	}
}

// Regions returns the two Regions, in GlobalConfig.Regions' order
// (whichever is the primary now: see [Global.WriterRegion]).
func (g *Global) Regions() []GlobalRegion {
	out := make([]GlobalRegion, len(g.regions))
	for i, r := range g.regions {
		out[i] = r.GlobalRegion
		out[i].Servers = append([]string(nil), r.Servers...)
	}
	return out
}

// WriterRegion returns the name of the primary Region now, the writer's
// (the simulator's truth, not the DNS's).
func (g *Global) WriterRegion() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.regions[g.primary].Name
}

// Writer returns the server id of the writer now.
func (g *Global) Writer() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.writer.ID
}

// node returns server id and its Region, nil for an unknown id.
func (g *Global) node(id string) (*node, *region) {
	for _, r := range g.regions {
		for _, n := range r.nodes {
			if n.ID == id {
				return n, r
			}
		}
	}
	return nil, nil
}

// InstanceEndpoint returns the instance endpoint of server id,
// ID.HASH.REGION.rds.amazonaws.com with its Region's hash ("" for an
// unknown id).
func (g *Global) InstanceEndpoint(id string) string {
	n, r := g.node(id)
	if n == nil {
		return ""
	}
	return n.ID + "." + r.Hash + "." + r.Name + ".rds.amazonaws.com"
}

// Addr returns where server id listens, "ip:port" ("" for an unknown id).
func (g *Global) Addr(id string) string {
	if n, _ := g.node(id); n != nil {
		return n.Addr()
	}
	return ""
}

// DSN returns a superuser connection string for host (a name, resolved
// through [Global.Cache] by PoolConfig, or an "ip:port" from
// [Global.Addr]), as [Cluster.DSN] does: with GlobalConfig.TLS a name
// gets sslmode=verify-full and CAFile.
func (g *Global) DSN(host string, extra ...string) string {
	return pgurl.Endpoint(host, TopologyPort, g.CAFile, extra...)
}

// PoolConfig parses g.DSN(host, extra...) and sets its LookupFunc to
// g.Cache.Lookup, so that the pool sees DNS changes up to
// GlobalConfig.TTL late.
func (g *Global) PoolConfig(host string, extra ...string) (*pgxpool.Config, error) {
	return pgurl.PoolConfig(g.DSN(host, extra...), g.Cache.Lookup)
}

// SetLag sets how late what the writer writes from now on reaches the
// secondary Region (negative: no delay); what is in flight keeps its
// delay.
func (g *Global) SetLag(d time.Duration) { g.link.setDelay(max(d, 0)) }

// CommittedIDs returns the ids in column id of table (in database
// postgres) on the writer, sorted, as [Cluster.CommittedIDs].
func (g *Global) CommittedIDs(ctx context.Context, table string) ([]int64, error) {
	g.mu.Lock()
	w := g.writer
	g.mu.Unlock()
	return committedIDs(ctx, w, table)
}

// Close stops the lag monitor, the link between the Regions and the
// servers, and removes their directories.
func (g *Global) Close() error {
	g.mu.Lock()
	closed := g.closed
	g.closed = true
	g.mu.Unlock()
	if closed {
		return nil
	}
	if g.stopMonitor != nil {
		g.stopMonitor()
	}
	g.wg.Wait()
	var err error
	if g.link != nil {
		err = g.link.close()
	}
	return errors.Join(err, removeAll(g.nodes, g.caDir))
}
