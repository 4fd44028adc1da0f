package outagetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/holdfast-db/holdfast/fakes/bluegreentest"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
	"github.com/holdfast-db/holdfast/fakes/internal/certs"
	"github.com/holdfast-db/holdfast/fakes/internal/pgnode"
	"github.com/holdfast-db/holdfast/fakes/internal/pgurl"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of the configurations.
const (
	DefaultName    = failovertest.DefaultName
	DefaultAccount = failovertest.DefaultAccount
	DefaultRegion  = failovertest.DefaultRegion
	// DefaultTTL is the TTL of the client-side DNS cache (Cache): what
	// RDS publishes its endpoints with.
	DefaultTTL = failovertest.DefaultTTL
	// defaultPort is the port of a name without one in DSN: the port
	// clients name (the resolver answers each server's real one).
	defaultPort = failovertest.TopologyPort
)

// ErrNotFound is matched (errors.Is) by the error of a Start function
// when the PostgreSQL server binaries are not installed.
var ErrNotFound = pgtest.ErrNotFound

// Event is one step of a simulation, when it was done, and the server it
// concerns: failovertest's, so that a demo draws every timeline alike.
type Event = failovertest.Event

// Result is what an operation played: the primary before and after, and
// its steps.
type Result struct {
	OldPrimary, NewPrimary string // server ids
	Events                 []Event
}

// At returns when the first event named name happened.
func (r Result) At(name string) (time.Time, bool) {
	return failovertest.Result{Events: r.Events}.At(name)
}

// timeline records the events of one operation and passes each to on.
type timeline struct {
	res Result
	on  func(Event)
}

func (t *timeline) emit(name, server string) {
	e := Event{At: time.Now(), Name: name, Server: server}
	t.res.Events = append(t.res.Events, e)
	if t.on != nil {
		t.on(e)
	}
}

// duo is what MultiAZ and Pair share: two PostgreSQL servers, a primary
// and a standby streaming from it in synchronous mode (a commit returns
// once the standby flushed it, so an acknowledged write survives the
// primary's loss), and the one name clients reach the primary by, in a
// fake DNS read through a client-side cache. Its operations are
// serialised (op).
type duo struct {
	name     string
	resolver *bluegreentest.Resolver
	cache    *bluegreentest.Cache
	caFile   string
	caDir    string
	singleIP bool

	op sync.Mutex // held by the operations: one at a time

	nodes []*pgnode.Node // both, the first primary first; set by startDuo

	mu               sync.Mutex
	primary, standby *pgnode.Node // standby nil while there is none
	closed           bool
}

// duoConfig configures startDuo.
type duoConfig struct {
	name  string    // the name clients use
	ids   [2]string // the servers' ids, the first primary's first
	hosts [2]string // their loopback addresses
	ttl   time.Duration
	tls   bool
	// conf returns both servers' settings (pgnode.Settings and the
	// shape's own).
	conf func(syncStandby bool) map[string]string
}

// startDuo starts the primary (initdb) and the standby (pg_basebackup
// from it), in synchronous mode; the caller publishes the name.
func startDuo(ctx context.Context, cfg duoConfig) (*duo, error) {
	bin, err := pgtest.BinDir()
	if err != nil {
		return nil, err
	}
	cred, err := pgtest.ServerUser()
	if err != nil {
		return nil, err
	}
	d := &duo{name: cfg.name, resolver: bluegreentest.NewResolver()}
	ttl := cfg.ttl
	if ttl == 0 {
		ttl = DefaultTTL
	}
	d.cache = d.resolver.Cached(ttl)
	hosts := cfg.hosts
	if pgnode.CanBind(hosts[0]) != nil || pgnode.CanBind(hosts[1]) != nil {
		d.singleIP = true
		hosts = [2]string{"127.0.0.1", "127.0.0.1"}
	}
	for i, id := range cfg.ids {
		d.nodes = append(d.nodes, &pgnode.Node{ID: id, Host: hosts[i], Bin: bin, Cred: cred, Conf: cfg.conf})
	}
	if err := d.start(ctx, cfg.tls); err != nil {
		return nil, errors.Join(err, d.close())
	}
	return d, nil
}

func (d *duo) start(ctx context.Context, tls bool) error {
	if tls {
		if err := d.makeCert(); err != nil {
			return fmt.Errorf("TLS certificate: %w", err)
		}
	}
	p, s := d.nodes[0], d.nodes[1]
	if err := p.StartPrimary(ctx); err != nil {
		return err
	}
	if err := pgnode.MakeStandby(ctx, s, p); err != nil {
		return err
	}
	if err := p.SetSync(ctx, true); err != nil {
		return err
	}
	if err := pgnode.WaitSync(ctx, p, 1); err != nil {
		return err
	}
	d.primary, d.standby = p, s
	return nil
}

// makeCert makes a CA, writes it to caFile and gives both servers one
// certificate for the name.
func (d *duo) makeCert() error {
	ca, err := certs.New()
	if err != nil {
		return err
	}
	certPEM, keyPEM, err := ca.Issue(d.name, []string{d.name})
	if err != nil {
		return err
	}
	if d.caDir, d.caFile, err = ca.WriteTemp("holdfast-outage-ca-*"); err != nil {
		return err
	}
	for _, n := range d.nodes {
		n.Cert = &pgnode.Cert{CertPEM: certPEM, KeyPEM: keyPEM}
	}
	return nil
}

// DSN returns a superuser connection string for host (the name, resolved
// through Cache by PoolConfig, or an "ip:port"), database postgres. Without
// TLS it has sslmode=disable. With it, the name gets
// sslmode=verify-full&sslrootcert=CAFile: the server's certificate must
// be signed by the simulation's CA and carry the name, whatever address
// the name resolves (or a dial is sent) to. An "ip:port" keeps
// sslmode=disable: the certificate names no address. extra are more
// "key=value" settings.
func (d *duo) DSN(host string, extra ...string) string {
	return pgurl.Endpoint(host, defaultPort, d.caFile, extra...)
}

// PoolConfig parses DSN(host, extra...) and sets its LookupFunc to
// Cache.Lookup, so that the pool sees a move of the name up to the
// cache's TTL late.
func (d *duo) PoolConfig(host string, extra ...string) (*pgxpool.Config, error) {
	return pgurl.PoolConfig(d.DSN(host, extra...), d.cache.Lookup)
}

// ServerIDs returns the ids of the two servers, the first primary first.
func (d *duo) ServerIDs() []string {
	return []string{d.nodes[0].ID, d.nodes[1].ID}
}

// Primary returns the id of the server that takes writes now (the
// simulator's truth, not the name's).
func (d *duo) Primary() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.primary.ID
}

// Standby returns the id of the standby streaming from the primary, ""
// while there is none (after an operation that left the old primary
// down).
func (d *duo) Standby() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.standby == nil {
		return ""
	}
	return d.standby.ID
}

// CommittedIDs returns the ids in column id of table (in database
// postgres) on the primary of the moment, sorted: the audit of
// acknowledged writes after an operation. table is an SQL identifier,
// used as given.
func (d *duo) CommittedIDs(ctx context.Context, table string) ([]int64, error) {
	p, _ := d.roles()
	ids, err := p.IDs(ctx, table)
	if err != nil {
		err = fmt.Errorf("fakes/outagetest: %w", err)
	}
	return ids, err
}

// operate runs op, one operation at a time, on the primary and the
// standby of the moment, recording both in its result and its events
// in it; op needs a standby. what names the operation in the error.
func (d *duo) operate(what string, on func(Event), op func(t *timeline, old, nw *pgnode.Node) error) (Result, error) {
	d.op.Lock()
	defer d.op.Unlock()
	t := &timeline{on: on}
	old, nw := d.roles()
	t.res.OldPrimary = old.ID
	err := errors.New("no standby (the old primary left down by an earlier operation?)")
	if nw != nil {
		t.res.NewPrimary = nw.ID
		err = op(t, old, nw)
	}
	if err != nil {
		return t.res, fmt.Errorf("fakes/outagetest: %s: %w", what, err)
	}
	return t.res, nil
}

// promote promotes the standby nw, returns once it takes writes
// (EventPromoted) and when that was.
func (d *duo) promote(ctx context.Context, t *timeline, nw *pgnode.Node) (time.Time, error) {
	if err := nw.Promote(ctx); err != nil {
		return time.Time{}, fmt.Errorf("promoting %s: %w", nw.ID, err)
	}
	if err := pgnode.WaitWritable(ctx, nw); err != nil {
		return time.Time{}, fmt.Errorf("promoting %s: %w", nw.ID, err)
	}
	promoted := time.Now()
	d.setRoles(nw, nil)
	t.emit(EventPromoted, nw.ID)
	return promoted, nil
}

// rejoin brings the old primary, shut down, back as the standby of nw
// (see rejoin); ready, when set, runs before the event (EventRejoined).
func (d *duo) rejoin(ctx context.Context, t *timeline, old, nw *pgnode.Node, ready func() error) error {
	if err := rejoin(ctx, old, nw); err != nil {
		return fmt.Errorf("rejoining %s: %w", old.ID, err)
	}
	d.setRoles(nw, old)
	if ready != nil {
		if err := ready(); err != nil {
			return fmt.Errorf("rejoining %s: %w", old.ID, err)
		}
	}
	t.emit(EventRejoined, old.ID)
	return nil
}

// node returns the server with id id, nil for an unknown id.
func (d *duo) node(id string) *pgnode.Node {
	for _, n := range d.nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// roles returns the primary and the standby of the moment.
func (d *duo) roles() (primary, standby *pgnode.Node) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.primary, d.standby
}

// setRoles records new roles.
func (d *duo) setRoles(primary, standby *pgnode.Node) {
	d.mu.Lock()
	d.primary, d.standby = primary, standby
	d.mu.Unlock()
}

// close stops both servers and removes their directories and the CA's.
func (d *duo) close() error {
	d.mu.Lock()
	closed := d.closed
	d.closed = true
	d.mu.Unlock()
	if closed {
		return nil
	}
	err := pgnode.RemoveAll(d.nodes)
	if d.caDir != "" {
		err = errors.Join(err, os.RemoveAll(d.caDir))
	}
	return err
}

// rejoin starts the old primary, shut down cleanly (fast), as a standby
// of the new one, as Patroni does after a switchover: its last WAL (the
// shutdown checkpoint) reached the standby before the promotion, since a
// fast shutdown waits for its walsenders to send it, so it follows the
// new timeline without a rewind (pg_rewind would need full_page_writes,
// which the servers turn off for speed). When it does not stream within
// 10 s it is re-created from a base backup instead. The new primary's
// commits then wait for it again (synchronous).
func rejoin(ctx context.Context, old, nw *pgnode.Node) error {
	if err := old.StartStandby(ctx, nw); err != nil {
		return err
	}
	if err := nw.SetSync(ctx, true); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := pgnode.WaitSync(wctx, nw, 1)
	cancel()
	if err == nil || ctx.Err() != nil {
		return err
	}
	if err := old.Stop(ctx, "immediate"); err != nil {
		return err
	}
	if err := old.Basebackup(ctx, nw); err != nil {
		return err
	}
	return pgnode.WaitSync(ctx, nw, 1)
}
