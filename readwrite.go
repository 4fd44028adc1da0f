package holdfast

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast/internal/conn"
	"github.com/holdfast-db/holdfast/internal/failovermon"
	"github.com/holdfast-db/holdfast/internal/topology"
	"github.com/holdfast-db/holdfast/retry"
)

// ReadWrite is read/write splitting over one cluster: a pool on its
// writer (cluster) endpoint and one on its reader endpoint, built by one
// factory, so that with WithFailover they share the cluster's monitor (the
// writer pool is held and redirected through a failover, the reader pool
// is routed to the readers: failover.Config.Readers). Build one with
// [Factory.NewReadWrite]. It is safe for concurrent use.
//
// The pattern: writes, and every transaction that writes, go to the
// writer; reads that may be stale by the replica lag go to the readers.
//
//	rw, err := f.NewReadWrite(ctx, cfg, nil, holdfast.PoolName("orders")) // cfg: the cluster endpoint's
//	defer rw.Close()
//	_, err = rw.Write().Exec(ctx, "INSERT INTO orders VALUES ($1)", id) // the writer
//	err = f.RunTx(ctx, rw.Write(), pgx.TxOptions{}, func(tx pgx.Tx) error { ... }) // the writer, re-run when it provably did not commit
//	rows, err := rw.Read(ctx).Query(ctx, "SELECT ... FROM orders") // a reader
//	err = f.RunTx(ctx, rw.Read(ctx), pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error { ... }) // a read-only transaction on a reader
//	q := db.New(rw.Read(ctx)) // sqlc: queries on a reader
//
// Read-your-writes: a reader trails the writer by its replica lag (on
// Aurora usually under 100 ms, seconds under heavy write load; on an RDS
// Multi-AZ DB cluster, whatever replay lags behind the semisynchronous
// commit), so a read right after a write may not see it there. A read that
// must see the caller's own writes goes to the writer: mark its context
// with [ReadYourWrites] (Read then returns the writer's runner), or use
// Write. holdfast does not track writes per caller: the context
// is the caller's statement of what it needs.
//
// A pool on the reader endpoint gets reader routing only with WithFailover;
// without it both pools connect by DNS (the reader endpoint answers one
// reader at random per lookup, the writer when there is none), and
// ReadWrite works the same.
type ReadWrite struct {
	f              *Factory
	writer, reader *pgxpool.Pool
	w, r           *DBTX
}

// NewReadWrite builds the pools of read/write splitting ([ReadWrite])
// from one factory: writer is the config of the cluster (writer) endpoint,
// reader the reader endpoint's; with reader nil it is derived from writer:
// a copy of writer whose host (in the fallbacks of the same host too, and
// the TLS ServerName, so that verify-full verifies the reader endpoint's
// name) NAME.cluster-ID.REGION.rds.amazonaws.com becomes
// NAME.cluster-ro-ID.REGION.rds.amazonaws.com, or, with WithFailover, an
// alias (failover.Config.Aliases) of the reader endpoint when the writer
// host is an alias of the cluster endpoint; everything else is writer's
// (pass the reader's config to change its pool sizes).
// Each pool is built as NewPool builds it (configured, its first
// connection made under the startup policy); when the reader pool cannot
// start, the writer pool is closed and the *StartupError returned.
//
// opts apply to both pools. With PoolName the writer pool is called name
// and the reader pool name+"-ro"; without one, each is called by its
// host, port and database as usual.
//
// It returns a *ConfigError for a nil config, for a writer config that is
// no cluster endpoint when reader is nil (an instance, custom or reader
// endpoint, an IP address, a name of your own that Aliases does not list,
// several hosts: pass the reader endpoint's config then), for a writer
// config already configured when reader is nil, and for the same config
// twice.
func (f *Factory) NewReadWrite(ctx context.Context, writer, reader *pgxpool.Config, opts ...PoolOption) (*ReadWrite, error) {
	switch {
	case f == nil:
		return nil, &ConfigError{Field: "Factory", Why: "nil factory: use holdfast.New"}
	case writer == nil:
		return nil, &ConfigError{Field: "writer", Why: "nil config"}
	case writer == reader:
		return nil, &ConfigError{Field: "reader", Why: "the writer's config: pass the reader endpoint's, or nil to derive it"}
	}
	if reader == nil {
		var err error
		if reader, err = f.readerConfig(writer); err != nil {
			return nil, err
		}
	}
	po, err := poolOptionsOf(opts)
	if err != nil {
		return nil, err
	}
	wopts, ropts := opts, opts
	if name := po.name; name != "" {
		wopts = append(slices.Clip(opts), PoolName(name))
		ropts = append(slices.Clip(opts), PoolName(name+"-ro"))
	}
	w, err := f.NewPool(ctx, writer, wopts...)
	if err != nil {
		return nil, err
	}
	r, err := f.NewPool(ctx, reader, ropts...)
	if err != nil {
		f.ClosePool(w)
		return nil, err
	}
	reread := f.e.Retrier(rereadPolicy, conn.LayerRead)
	return &ReadWrite{f: f, writer: w, reader: r, w: f.DBTX(w), r: &DBTX{f: f, pool: r, reread: &reread}}, nil
}

// rereadPolicy is the reader runner's one re-run of a read lost on a
// standby, at once (the policy's shortest wait), within the caller's
// deadline and the factory's retry budget.
var rereadPolicy = retry.Policy{MaxAttempts: 2, InitialInterval: time.Millisecond, Multiplier: 1, MaxInterval: time.Millisecond}

// readerConfig derives the reader endpoint's config from writer's (see
// NewReadWrite).
func (f *Factory) readerConfig(writer *pgxpool.Config) (*pgxpool.Config, error) {
	if writer == nil || writer.ConnConfig == nil {
		return nil, &ConfigError{Field: "writer", Why: "nil config: build it with pgxpool.ParseConfig"}
	}
	if conn.OfConfig(writer) != nil {
		return nil, &ConfigError{Field: "writer", Why: "already configured: derive the reader's config before Configure or NewPool"}
	}
	host := writer.ConnConfig.Host
	for _, fb := range writer.ConnConfig.Fallbacks {
		if fb.Host != host {
			return nil, &ConfigError{Field: "writer", Why: "several hosts: pass the reader endpoint's config to NewReadWrite"}
		}
	}
	ep := host
	if f != nil && f.failover != nil {
		ep = failovermon.Endpoint(f.failover.Aliases, host)
	}
	peer := topology.PeerEndpoint(ep)
	if topology.KindOf(topology.NormHost(ep)) != topology.KindWriterCluster || peer == "" {
		return nil, &ConfigError{Field: "writer", Why: fmt.Sprintf(
			"host %q is not an RDS cluster (writer) endpoint NAME.cluster-ID.REGION.rds.amazonaws.com, nor a failover.Config.Aliases name of one: "+
				"its reader endpoint cannot be derived; pass the reader endpoint's config to NewReadWrite", host)}
	}
	readerHost := peer
	if f != nil && f.failover != nil {
		aliases := make([]string, 0, len(f.failover.Aliases))
		for a := range f.failover.Aliases {
			aliases = append(aliases, a)
		}
		slices.Sort(aliases) // one answer, whatever the map's order
		for _, a := range aliases {
			if topology.NormHost(failovermon.Endpoint(f.failover.Aliases, a)) == peer {
				readerHost = a
				break
			}
		}
	}
	rc := writer.Copy()
	cc := rc.ConnConfig
	cc.Host = readerHost
	if cc.TLSConfig != nil && cc.TLSConfig.ServerName == host {
		cc.TLSConfig.ServerName = readerHost
	}
	for _, fb := range cc.Fallbacks {
		fb.Host = readerHost
		if fb.TLSConfig != nil && fb.TLSConfig.ServerName == host {
			fb.TLSConfig.ServerName = readerHost
		}
	}
	return rc, nil
}

// Writer returns the pool on the writer (cluster) endpoint.
func (rw *ReadWrite) Writer() *pgxpool.Pool { return rw.writer }

// Reader returns the pool on the reader endpoint.
func (rw *ReadWrite) Reader() *pgxpool.Pool { return rw.reader }

// Write returns the statement runner of the writer pool (a [DBTX]:
// connections through Factory.Acquire, for sqlc's db.New too).
func (rw *ReadWrite) Write() *DBTX { return rw.w }

// Read returns the statement runner of the reader pool, or of the writer
// pool when ctx is marked with [ReadYourWrites]. A write through it on a
// reader fails with the server's 25006 (read-only), never re-run.
//
// A read whose connection died on a reader runs once more: a Query
// (before its first row) or QueryRow whose SQL only reads (its first
// keyword SELECT, VALUES, TABLE, SHOW or WITH, and no INSERT, UPDATE,
// DELETE, MERGE, INTO, COPY, CALL, FOR UPDATE or SHARE in it) and whose
// answer was lost on a server that said it is in hot standby
// (in_hot_standby=on, PostgreSQL 14 and later; pg_is_in_recovery() at
// connect on older servers), where nothing commits: a reader that crashed,
// or one that hung and that WithFailover's reader health cut. It runs on a
// new connection, which the reader routing sends to a live reader, within
// ctx and the factory's retry budget, counted as holdfast.layer "read" (a
// WARN line, holdfast.retries). Such a loss is Transient "lost-on-standby"
// wherever it happens, not [ErrOutcomeUnknown]. Nothing else is re-run: no
// Exec, batch, copy or transaction (RunTx re-runs a read-only transaction
// whose COMMIT's answer was lost on a standby), nothing that failed on a
// writer (the reader endpoint answers with the writer when there is no
// reader, and ReadYourWrites reads there), and no read once a row of it
// was returned.
func (rw *ReadWrite) Read(ctx context.Context) *DBTX {
	if conn.ReadYourWrites(ctx) {
		return rw.w
	}
	return rw.r
}

// Close closes both pools and what the factory runs for them
// (Factory.ClosePool: the cluster's monitor goes with the last pool of the
// factory on it). It waits, as pool.Close does, for the connections in use
// to be released.
func (rw *ReadWrite) Close() {
	if rw == nil {
		return
	}
	rw.f.ClosePool(rw.reader)
	rw.f.ClosePool(rw.writer)
}

// ReadYourWrites returns ctx marked so that [ReadWrite.Read] (and
// sqldb's ReadWrite.Read) under it returns the writer's: a read that must
// see the caller's own writes, which a reader may not have replayed yet.
// Mark the context once the caller has written (for a request, for a
// session's next requests, as the application decides).
func ReadYourWrites(ctx context.Context) context.Context { return conn.WithReadYourWrites(ctx) }
