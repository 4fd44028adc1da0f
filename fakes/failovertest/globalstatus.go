package failovertest

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/holdfast-db/holdfast/fakes/internal/pgnode"
	"github.com/jackc/pgx/v5"
)

// installGlobal creates a Global's status functions, as Aurora PostgreSQL
// has them, in pg_catalog and owned by the superuser that runs the
// simulator:
//
//   - aurora_global_db_instance_status(): a row per running server of
//     both Regions, the writer's first (session_id MASTER_SESSION_ID; NULL
//     but for durable_lsn), then its Region's, then the other's.
//   - aurora_global_db_status(): a row per Region, the primary's first
//     (durability_lag_in_msec and rpo_lag_in_msec -1,
//     last_lag_calculation_time 1970-01-01 00:00:00+00).
//
// Both read control tables the simulator writes on the writer, which
// reach every server by physical replication (see [Global]).
const installGlobal = `
CREATE TABLE IF NOT EXISTS holdfast_failover.global_status (
	aws_region                text PRIMARY KEY,
	highest_lsn_written       bigint,
	durability_lag_in_msec    bigint,
	rpo_lag_in_msec           bigint,
	last_lag_calculation_time timestamptz,
	feedback_epoch            bigint,
	feedback_xmin             bigint
);
CREATE OR REPLACE FUNCTION pg_catalog.aurora_global_db_instance_status()
RETURNS TABLE (server_id text, session_id text, aws_region text, durable_lsn bigint, highest_lsn_rcvd bigint,
	feedback_epoch bigint, feedback_xmin bigint, oldest_read_view_lsn bigint, visibility_lag_in_msec real)
LANGUAGE sql STABLE AS $fn$
	SELECT r.server_id, r.session_id, r.aws_region, r.durable_lsn, r.highest_lsn_rcvd, r.feedback_epoch,
		r.feedback_xmin, r.oldest_read_view_lsn, r.replica_lag_in_msec
	FROM holdfast_failover.replica_status r
	WHERE r.aws_region IS NOT NULL
	ORDER BY r.session_id <> 'MASTER_SESSION_ID',
		r.aws_region IS DISTINCT FROM (SELECT w.aws_region FROM holdfast_failover.replica_status w
			WHERE w.session_id = 'MASTER_SESSION_ID' LIMIT 1),
		r.aws_region, r.server_id
$fn$;
CREATE OR REPLACE FUNCTION pg_catalog.aurora_global_db_status()
RETURNS TABLE (aws_region text, highest_lsn_written bigint, durability_lag_in_msec bigint, rpo_lag_in_msec bigint,
	last_lag_calculation_time timestamptz, feedback_epoch bigint, feedback_xmin bigint)
LANGUAGE sql STABLE AS $fn$
	SELECT g.aws_region, g.highest_lsn_written, g.durability_lag_in_msec, g.rpo_lag_in_msec,
		g.last_lag_calculation_time, g.feedback_epoch, g.feedback_xmin
	FROM holdfast_failover.global_status g
	ORDER BY g.rpo_lag_in_msec IS DISTINCT FROM -1, g.aws_region
$fn$;
`

// statusInterval is how often the monitor measures the replication and
// rewrites the status (last_lag_calculation_time).
const statusInterval = 200 * time.Millisecond

// conns are the simulator's own connections, by server: the monitor keeps
// its own from one sample to the next; an operation closes its own at its
// end.
type conns map[*node]*pgx.Conn

func (cs conns) get(ctx context.Context, n *node) (*pgx.Conn, error) {
	if c := cs[n]; c != nil {
		return c, nil
	}
	c, err := pgx.Connect(ctx, n.DSN())
	if err != nil {
		return nil, err
	}
	cs[n] = c
	return c, nil
}

// drop closes the connection to n, if any: the next get connects again.
func (cs conns) drop(n *node) {
	if c := cs[n]; c != nil {
		c.Close(context.Background())
		delete(cs, n)
	}
}

func (cs conns) close() {
	for n := range cs {
		cs.drop(n)
	}
}

// stream is a standby's row of its upstream's pg_stat_replication.
type stream struct {
	write, flush, replay          int64 // LSNs, as bigint
	writeLag, flushLag, replayLag time.Duration
	xmin                          any // backend_xmin (hot standby feedback), nil without
}

const streamsQuery = `SELECT application_name,
	coalesce(write_lsn - '0/0', 0)::bigint, coalesce(flush_lsn - '0/0', 0)::bigint, coalesce(replay_lsn - '0/0', 0)::bigint,
	coalesce(extract(epoch FROM write_lag), 0)::float8, coalesce(extract(epoch FROM flush_lag), 0)::float8,
	coalesce(extract(epoch FROM replay_lag), 0)::float8, backend_xmin::text::bigint
	FROM pg_stat_replication WHERE state = 'streaming'`

// streams reads the pg_stat_replication of the server on conn, by
// standby.
func streams(ctx context.Context, conn *pgx.Conn) (map[string]stream, error) {
	rows, err := conn.Query(ctx, streamsQuery)
	if err != nil {
		return nil, err
	}
	out := map[string]stream{}
	var name string
	var s stream
	var wl, fl, rl float64
	var xmin *int64
	_, err = pgx.ForEachRow(rows, []any{&name, &s.write, &s.flush, &s.replay, &wl, &fl, &rl, &xmin}, func() error {
		s.writeLag, s.flushLag, s.replayLag = seconds(wl), seconds(fl), seconds(rl)
		s.xmin = nil
		if xmin != nil {
			s.xmin = *xmin
		}
		out[name] = s
		return nil
	})
	return out, err
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

func ms(d time.Duration) int64 { return int64(math.Round(float64(d) / float64(time.Millisecond))) }

// secondaryLag is the secondary Region's last measured lag: what
// aurora_global_db_status() shows, and what a failover with data loss
// reports.
type secondaryLag struct {
	durability, rpo time.Duration
	streaming       time.Time // when the secondary last streamed from the writer
	highest         any       // its highest_lsn_written then
}

// status measures the replication (pg_stat_replication on the writer and
// on the secondary Region's first server, which its readers stream from)
// and writes what the status functions show on the writer, through cs.
// With wait, it returns once every running server has replayed it, so
// that they all name the same writer.
func (g *Global) status(ctx context.Context, cs conns, wait bool) error {
	g.mu.Lock()
	w, primary, secondary, gen := g.writer, g.regions[g.primary], g.regions[1-g.primary], g.gen
	down := map[*node]bool{}
	for _, n := range g.nodes {
		down[n] = n.crashed
	}
	g.mu.Unlock()
	head := secondary.nodes[0]

	wc, err := cs.get(ctx, w)
	if err != nil {
		return err
	}
	var current, flushed, epoch int64
	if err := wc.QueryRow(ctx, `SELECT (pg_current_wal_lsn() - '0/0')::bigint, (pg_current_wal_flush_lsn() - '0/0')::bigint,
		pg_snapshot_xmax(pg_current_snapshot())::text::bigint >> 32`).Scan(&current, &flushed, &epoch); err != nil {
		return err
	}
	fromWriter, err := streams(ctx, wc)
	if err != nil {
		return err
	}
	fromHead := map[string]stream{}
	if !down[head] {
		// Its readers' rows only: when it does not answer (restarting),
		// they have no figures this time.
		hc, err := cs.get(ctx, head)
		if err == nil {
			fromHead, err = streams(ctx, hc)
		}
		if err != nil {
			cs.drop(head)
		}
	}
	now := time.Now()

	var rows []statusRow
	row := func(i int, n *node, r *region) statusRow {
		return statusRow{id: n.ID, session: fmt.Sprintf("5f0c0c1e-%04d-4000-8000-%012d", i, gen), resourceID: n.resourceID,
			endpoint: g.InstanceEndpoint(n.ID), region: r.Name}
	}
	for i, n := range g.nodes {
		if down[n] {
			continue // a server that is down is in no one's status
		}
		r := primary
		if n.region == secondary.Name {
			r = secondary
		}
		x := row(i, n, r)
		var s stream
		var ok bool
		switch {
		case n == w:
			x.session, x.durable = WriterSessionID, flushed
			rows = append(rows, x)
			continue
		case r == primary:
			s, ok = fromWriter[n.ID]
			x.durable = flushed // the Region's storage
		case n == head:
			s, ok = fromWriter[n.ID]
			if ok {
				x.durable = s.flush
			}
		default: // the secondary's reader, cascading from head
			s, ok = fromHead[n.ID]
			if hs, hok := fromWriter[head.ID]; ok && hok {
				x.durable = hs.flush
				s.replayLag += hs.replayLag // behind the writer, through head
			}
		}
		if ok {
			x.received, x.readView, x.epoch, x.xmin = s.write, s.replay, epoch, s.xmin
			x.lag = float32(s.replayLag) / float32(time.Millisecond)
		}
		rows = append(rows, x)
	}

	g.mu.Lock()
	if hs, ok := fromWriter[head.ID]; ok {
		g.lag = secondaryLag{durability: hs.writeLag, rpo: hs.flushLag, streaming: now, highest: hs.flush}
	} else if !g.lag.streaming.IsZero() {
		// Not streaming: what the secondary lacks grows older.
		gap := now.Sub(g.lag.streaming)
		g.lag.durability, g.lag.rpo, g.lag.streaming = g.lag.durability+gap, g.lag.rpo+gap, now
	}
	lag := g.lag
	g.mu.Unlock()
	regions := [][]any{{primary.Name, current, int64(-1), int64(-1), time.Unix(0, 0), int64(0), int64(0)}}
	if down[head] {
		regions = append(regions, []any{secondary.Name, nil, nil, nil, nil, nil, nil})
	} else {
		var xmin any
		if hs, ok := fromWriter[head.ID]; ok {
			xmin = hs.xmin
		}
		regions = append(regions, []any{secondary.Name, lag.highest, ms(lag.durability), ms(lag.rpo), now, epoch, xmin})
	}

	lsn, err := writeRows(ctx, wc, rows, regions)
	if err != nil || !wait {
		return err
	}
	for _, n := range g.nodes {
		if n == w || down[n] {
			continue
		}
		if err := pgnode.WaitReplayed(ctx, n.Node, lsn); err != nil {
			return fmt.Errorf("%s replaying the status: %w", n.ID, err)
		}
	}
	return nil
}

// monitor rewrites the status every statusInterval, as Aurora calculates
// its lags, until Close; it skips while an operation runs (which writes
// the status itself once its new writer takes writes).
func (g *Global) monitor(ctx context.Context) {
	cs := conns{}
	defer cs.close()
	t := time.NewTicker(statusInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !g.op.TryLock() {
			continue
		}
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		err := g.status(sctx, cs, false)
		scancel()
		g.op.Unlock()
		if err != nil {
			cs.close() // a server restarted, or changed roles: connect again next time
		}
	}
}

// lastLag returns the secondary's last measured lag.
func (g *Global) lastLag() secondaryLag {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lag
}
