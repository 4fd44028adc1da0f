package failover_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/fakes/failovertest"
)

// standbyReads is a read workload: workers each running reads, each tried
// once with a timeout, counting what fails and what ends as outcome
// unknown.
type standbyReads struct {
	ok, failed, unknown atomic.Int64
	mu                  sync.Mutex
	errs                map[string]int
}

// readSQL takes a little while, so that reads are in flight when a reader
// fails.
const readSQL = "SELECT pg_catalog.pg_backend_pid() FROM pg_catalog.pg_sleep(0.05)"

func (r *standbyReads) run(ctx context.Context, f *holdfast.Factory, read func(ctx context.Context, i int) error, workers int, timeout time.Duration) *sync.WaitGroup {
	var wg sync.WaitGroup
	r.errs = map[string]int{}
	for w := range workers {
		wg.Go(func() {
			for i := w; ctx.Err() == nil; i++ {
				qctx, cancel := context.WithTimeout(ctx, timeout)
				err := read(qctx, i)
				cancel()
				if ctx.Err() != nil {
					return
				}
				if err == nil {
					r.ok.Add(1)
					continue
				}
				r.failed.Add(1)
				time.Sleep(20 * time.Millisecond) // a refused reader is refused at once: no spin
				v := f.Classify(err)
				if errors.Is(err, holdfast.ErrOutcomeUnknown) || v.Reason == classify.ReasonOutcomeUnknown {
					r.unknown.Add(1)
				}
				r.mu.Lock()
				r.errs[fmt.Sprintf("%v: %v", v, err)]++
				r.mu.Unlock()
			}
		})
	}
	return &wg
}

// querier is what a read runs on: ReadWrite.Read's runner, a pool, a
// transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// readOn is one read on db: a QueryRow (i even) or a Query read to its
// end.
func readOn(ctx context.Context, db querier, i int) error {
	var pid int
	if i%2 == 0 {
		return db.QueryRow(ctx, readSQL).Scan(&pid)
	}
	rows, err := db.Query(ctx, readSQL)
	if err != nil {
		return err
	}
	n := 0
	for rows.Next() {
		if err := rows.Scan(&pid); err != nil {
			rows.Close()
			return err
		}
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("%d rows, want 1", n)
	}
	return nil
}

func (r *standbyReads) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%d ok, %d failed (%d outcome unknown) %v", r.ok.Load(), r.failed.Load(), r.unknown.Load(), r.errs)
}

// layerSum returns the sum of the points of counter name whose
// holdfast.layer is layer.
func layerSum(ctx context.Context, t *testing.T, rd *sdkmetric.ManualReader, name, layer string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := rd.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if v, _ := dp.Attributes.Value("holdfast.layer"); v.AsString() == layer {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// Issue 30, item 8: a read whose answer was lost on a standby is not
// "outcome unknown" (nothing commits on a standby: in_hot_standby=on), and
// ReadWrite.Read's runner runs it once more on a new connection, which
// the reader routing sends to a live reader. A 10-minute soak with reader
// crashes and hangs on 6b91b9e ended 17 reads as outcome unknown, all on
// standbys. Here: a read loop through ReadWrite.Read while a reader
// crashes (or hangs): 0 reads fail, 0 end as outcome unknown, and the
// reads whose connection died are re-run (holdfast.retries of
// holdfast.layer "read") and succeed (holdfast.recoveries). The controls:
// pgx's plain pool on the reader endpoint fails its reads in flight (a
// hang: until their timeout); a write on the writer whose answer is lost
// stays outcome unknown, and the same loss of a read on a reader is
// Transient "lost-on-standby", not re-run once its context ended.
func TestIssue30ReadLostOnStandby(t *testing.T) {
	t.Run("crash", func(t *testing.T) { testReadLostOnStandby(t, false) })
	t.Run("hang", func(t *testing.T) { testReadLostOnStandby(t, true) })
}

func testReadLostOnStandby(t *testing.T, hang bool) {
	const workers = 8
	kind := map[bool]string{false: "crash", true: "hang"}[hang]
	c := failovertest.StartTest(t, failovertest.Config{Replicas: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	readerUsers(ctx, t, c, "hf", "plain")

	metrics := sdkmetric.NewManualReader()
	f := newFactory(t, holdfast.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics))))
	wcfg, err := c.PoolConfig(c.ClusterEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	wcfg.ConnConfig.User = "hf"
	rw, err := f.NewReadWrite(ctx, wcfg, readerPoolConfig(t, c, "hf", 9))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rw.Close)
	openAtOnce(ctx, t, rw.Reader(), 9)

	// The control: pgx's plain pool on the reader endpoint. Its
	// connections pile on the reader the DNS answers: that one fails.
	plain, err := pgxpool.NewWithConfig(ctx, readerPoolConfig(t, c, "plain", 4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.Close)
	openAtOnce(ctx, t, plain, 4)
	pc := perReader(ctx, t, c, "plain")
	victim := c.Readers()[0]
	for id, n := range pc {
		if n > pc[victim] {
			victim = id
		}
	}
	m := f.Failover(rw.Reader())
	t.Logf("%s: victim %s; connections per reader: holdfast %v, plain %v", kind, victim, perReader(ctx, t, c, "hf"), pc)

	// A read in flight on the victim on a pool's own path (no re-run
	// there): its loss is Transient "lost-on-standby" all the same.
	side, err := f.NewPool(ctx, readerPoolConfig(t, c, "hf", 3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(side.Close)
	openAtOnce(ctx, t, side, 3)
	var onVictim *pgxpool.Conn
	for _, pc := range side.AcquireAllIdle(ctx) {
		if onVictim == nil && pc.Conn().PgConn().Conn().RemoteAddr().String() == c.Addr(victim) {
			onVictim = pc
			continue
		}
		pc.Release()
	}
	if onVictim == nil {
		t.Fatalf("no connection of the side pool on %s", victim)
	}
	longErr := make(chan error, 1)

	var hf, ctl standbyReads
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	// Through ReadWrite.Read: a QueryRow, a Query, and every third a
	// read-only transaction of one (RunTx).
	wg := hf.run(wctx, f, func(ctx context.Context, i int) error {
		if i%3 == 2 {
			return f.RunTx(ctx, rw.Read(ctx), pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error { return readOn(ctx, tx, i/3) })
		}
		return readOn(ctx, rw.Read(ctx), i)
	}, workers, 10*time.Second)
	cwg := ctl.run(wctx, f, func(ctx context.Context, i int) error { return readOn(ctx, plain, i) }, 4, 3*time.Second)
	if !waitFor(ctx, func() bool { return hf.ok.Load() >= 200 && ctl.ok.Load() >= 50 }) {
		t.Fatalf("before the %s: the reads do not run: holdfast %v; plain %v", kind, &hf, &ctl)
	}
	if hf.failed.Load()+ctl.failed.Load() > 0 {
		t.Fatalf("before the %s: holdfast %v; plain %v", kind, &hf, &ctl)
	}

	go func() {
		var one int
		err := onVictim.QueryRow(ctx, "SELECT 1 FROM pg_catalog.pg_sleep(30)").Scan(&one)
		onVictim.Release()
		longErr <- err
	}()
	time.Sleep(200 * time.Millisecond) // the long read is under way
	at := time.Now()
	if hang {
		err = c.HangReader(ctx, victim)
	} else {
		err = c.CrashReader(ctx, victim)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !waitFor(ctx, func() bool { return !lastMonitorEvent(m.Status(), "reader down").IsZero() }) {
		t.Fatalf("the monitor never found %s down", victim)
	}
	downAt := lastMonitorEvent(m.Status(), "reader down")
	okAt := hf.ok.Load()
	// The reads go on for 4 s after the reader was found down: long
	// enough for the plain pool's reads on the hung reader to time out.
	if !waitFor(ctx, func() bool { return time.Since(downAt) >= 4*time.Second && hf.ok.Load() >= okAt+200 }) {
		t.Fatalf("%s: the reads did not go on after %s was found down: %v", kind, victim, &hf)
	}
	stop()
	wg.Wait()
	cwg.Wait()
	reruns := layerSum(ctx, t, metrics, "holdfast.retries", "read")
	recovered := layerSum(ctx, t, metrics, "holdfast.recoveries", "read")
	txReruns := layerSum(ctx, t, metrics, "holdfast.retries", "transaction")
	t.Logf("MEASURED %s of %s (found down %v after): holdfast through ReadWrite.Read: %v; %d reads re-run, %d of them succeeded; %d read-only transactions re-run",
		kind, victim, downAt.Sub(at).Round(time.Millisecond), &hf, reruns, recovered, txReruns)
	t.Logf("MEASURED %s of %s: control, plain pgxpool on the reader endpoint: %v", kind, victim, &ctl)
	if n := hf.unknown.Load(); n > 0 {
		t.Errorf("%s: %d reads ended as outcome unknown, want 0 (nothing commits on a standby)", kind, n)
	}
	if n := hf.failed.Load(); n > 0 {
		t.Errorf("%s: %d reads failed, want 0 (a read whose connection died is re-run): %v", kind, n, &hf)
	}
	if reruns+txReruns == 0 || recovered != reruns {
		t.Errorf("%s: %d reads re-run, %d succeeded, %d transactions re-run: want the reads in flight on %s re-run, each successfully", kind, reruns, recovered, txReruns, victim)
	}
	if ctl.failed.Load() == 0 {
		t.Errorf("control: the plain pool's reads did not fail under the %s: %v", kind, &ctl)
	}

	lerr := <-longErr
	t.Logf("MEASURED %s: a read in flight on %s on a pool's own path: %v (%v)", kind, victim, f.Classify(lerr), lerr)
	if v := f.Classify(lerr); errors.Is(lerr, holdfast.ErrOutcomeUnknown) || v.Reason != classify.ReasonStandbyLost || !v.Retryable() {
		t.Errorf("%s: a read in flight on %s on a pool's own path: %v (%v), want transient %s", kind, victim, v, lerr, classify.ReasonStandbyLost)
	}

	// The control: a write in flight on the writer when it crashes stays
	// outcome unknown.
	if _, err := rw.Write().Exec(ctx, "CREATE TABLE IF NOT EXISTS standby_control (id int)"); err != nil {
		t.Fatal(err)
	}
	werr := make(chan error, 1)
	go func() {
		_, err := rw.Write().Exec(ctx, "INSERT INTO standby_control SELECT $1::int FROM pg_catalog.pg_sleep(30)", 1)
		werr <- err
	}()
	time.Sleep(300 * time.Millisecond) // the write is under way
	fctx, fcancel := context.WithTimeout(ctx, time.Minute)
	defer fcancel()
	if _, err := c.Failover(fctx, failovertest.Scenario{Kind: failovertest.Crash}); err != nil {
		t.Fatal(err)
	}
	err = <-werr
	t.Logf("MEASURED control: a write in flight on the writer when it crashed: %v (%v)", f.Classify(err), err)
	if !errors.Is(err, holdfast.ErrOutcomeUnknown) || f.Classify(err).Reason != classify.ReasonOutcomeUnknown {
		t.Errorf("a write on the writer whose answer was lost: %v (%v), want outcome unknown", f.Classify(err), err)
	}
}

// answerLoser is a dial whose connections lose the answer to one request
// when armed: the connection that next writes a request whose text
// contains the armed string sends it (the server runs it) and from then on
// reads EOF, as when a server dies after running a statement. It counts
// the requests of each string it was asked to count.
type answerLoser struct {
	armed atomic.Pointer[string]
	mu    sync.Mutex
	sent  map[string]int
}

func (l *answerLoser) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &losingConn{Conn: c, l: l}, nil
}

// arm makes the next request containing s lose its answer and counts the
// requests containing s from now on.
func (l *answerLoser) arm(s string) {
	l.mu.Lock()
	if l.sent == nil {
		l.sent = map[string]int{}
	}
	l.sent[s] = 0
	l.mu.Unlock()
	l.armed.Store(&s)
}

func (l *answerLoser) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent[s]
}

type losingConn struct {
	net.Conn
	l    *answerLoser
	lost atomic.Bool
}

func (c *losingConn) Write(b []byte) (int, error) {
	if len(b) > 0 && (b[0] == 'Q' || b[0] == 'P' || b[0] == 'B') {
		c.l.mu.Lock()
		for s := range c.l.sent {
			if bytes.Contains(b, []byte(s)) {
				c.l.sent[s]++
			}
		}
		c.l.mu.Unlock()
		if a := c.l.armed.Load(); a != nil && bytes.Contains(b, []byte(*a)) && c.l.armed.CompareAndSwap(a, nil) {
			c.lost.Store(true)
		}
	}
	return c.Conn.Write(b)
}

func (c *losingConn) Read(b []byte) (int, error) {
	if c.lost.Load() {
		_ = c.Conn.Close()
		return 0, io.EOF
	}
	return c.Conn.Read(b)
}

// Issue 30, item 8, one case at a time: the answer to one request is lost
// (the server ran it), on the reader (a standby) or on the writer,
// through each runner. On a standby the loss is Transient
// "lost-on-standby"; ReadWrite.Read's runner runs a read (Query,
// QueryRow) once more, and RunTx a read-only transaction whose COMMIT's
// answer was lost; nothing else is run again. On the writer it stays
// outcome unknown, never run again. The one gap: a pool's own path in the
// simple protocol (an Exec without arguments), where pgx drops the
// connection's error: unknown, as before.
func TestIssue30LostAnswerOnStandby(t *testing.T) {
	c := failovertest.StartTest(t, failovertest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	metrics := sdkmetric.NewManualReader()
	f := newFactory(t, holdfast.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics))))
	var l answerLoser
	wcfg, err := c.PoolConfig(c.ClusterEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	rcfg, err := c.PoolConfig(c.ReaderEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	wcfg.ConnConfig.DialFunc, rcfg.ConnConfig.DialFunc = l.dial, l.dial
	// A statement and its execution in one request (the marker's), unless
	// a case asks for pgx's default, which prepares it first.
	wcfg.ConnConfig.DefaultQueryExecMode, rcfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec, pgx.QueryExecModeExec
	rw, err := f.NewReadWrite(ctx, wcfg, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rw.Close)
	if _, err := rw.Write().Exec(ctx, "CREATE TABLE standby_lost (id int)"); err != nil {
		t.Fatal(err)
	}
	// The same pair as PostgreSQL 13 would show it: no in_hot_standby;
	// the connector asks pg_is_in_recovery() at connect.
	owcfg, err := c.PoolConfig(c.ClusterEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	orcfg, err := c.PoolConfig(c.ReaderEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	owcfg.ConnConfig.DialFunc, orcfg.ConnConfig.DialFunc = l.dialOld, l.dialOld
	owcfg.ConnConfig.DefaultQueryExecMode, orcfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec, pgx.QueryExecModeExec
	old, err := f.NewReadWrite(ctx, owcfg, orcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(old.Close)
	oc, err := old.Reader().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	version, hot := oc.Conn().PgConn().ParameterStatus("server_version"), oc.Conn().PgConn().ParameterStatus("in_hot_standby")
	oc.Release()
	if version != "13.99" || hot != "" {
		t.Fatalf("the older server's connection reports server_version %q, in_hot_standby %q", version, hot)
	}
	var inRecovery bool
	if !waitFor(ctx, func() bool {
		var n int
		err := rw.Read(ctx).QueryRow(ctx, "SELECT count(*) FROM standby_lost WHERE pg_catalog.pg_is_in_recovery()").Scan(&n)
		return err == nil
	}) {
		t.Fatal("the reader never replayed the table")
	}
	if err := rw.Read(ctx).QueryRow(ctx, "SELECT pg_catalog.pg_is_in_recovery()").Scan(&inRecovery); err != nil || !inRecovery {
		t.Fatalf("the reader runner reads from a server in recovery %v: %v", inRecovery, err)
	}

	type want struct {
		runs   int    // times the request was sent
		reason string // "" for success
	}
	readOnly := pgx.TxOptions{AccessMode: pgx.ReadOnly}
	row := func(db interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}, sql string) error {
		var n int
		return db.QueryRow(ctx, sql, 1).Scan(&n)
	}
	rows := func(db interface {
		Query(context.Context, string, ...any) (pgx.Rows, error)
	}, sql string) error {
		rs, err := db.Query(ctx, sql, 1)
		if err != nil {
			return err
		}
		for rs.Next() {
		}
		rs.Close()
		return rs.Err()
	}
	for _, tc := range []struct {
		name, marker string
		run          func(marker string) error
		want         want
	}{
		{"reader QueryRow: re-run", "/*m1*/", func(m string) error { return row(rw.Read(ctx), "SELECT $1::int "+m) }, want{2, ""}},
		{"reader Query: re-run", "/*m2*/", func(m string) error { return rows(rw.Read(ctx), "SELECT $1::int "+m) }, want{2, ""}},
		{"reader QueryRow, its prepare's answer lost: re-run", "/*m8*/", func(m string) error {
			var n int
			return rw.Read(ctx).QueryRow(ctx, "SELECT $1::int "+m, pgx.QueryExecModeCacheStatement, 1).Scan(&n)
		}, want{2, ""}},
		{"reader RunTx read-only, COMMIT lost: re-run", "commit", func(string) error {
			return f.RunTx(ctx, rw.Read(ctx), readOnly, func(tx pgx.Tx) error { return row(tx, "SELECT $1::int") })
		}, want{2, ""}},
		{"reader Exec, simple protocol: not re-run", "/*m3*/", func(m string) error {
			_, err := rw.Read(ctx).Exec(ctx, "SELECT 1 "+m)
			return err
		}, want{1, classify.ReasonStandbyLost}},
		{"reader, a write by the reader runner: not re-run", "/*m4*/", func(m string) error {
			return row(rw.Read(ctx), "WITH d AS (DELETE FROM standby_lost RETURNING id) SELECT count(*)::int + $1 FROM d "+m)
		}, want{1, classify.ReasonStandbyLost}},
		{"reader pool's own path, extended protocol", "/*m5*/", func(m string) error { return row(rw.Reader(), "SELECT $1::int "+m) }, want{1, classify.ReasonStandbyLost}},
		{"reader pool's own path, simple protocol (pgx drops the cause)", "/*m6*/", func(m string) error {
			_, err := rw.Reader().Exec(ctx, "SELECT 1 "+m)
			return err
		}, want{1, classify.ReasonOutcomeUnknown}},
		{"PostgreSQL 13 reader QueryRow (pg_is_in_recovery at connect): re-run", "/*m9*/", func(m string) error {
			return row(old.Read(ctx), "SELECT $1::int "+m)
		}, want{2, ""}},
		{"PostgreSQL 13 writer QueryRow", "/*m10*/", func(m string) error { return row(old.Write(), "SELECT $1::int "+m) }, want{1, classify.ReasonOutcomeUnknown}},
		{"writer QueryRow", "/*m7*/", func(m string) error { return row(rw.Write(), "SELECT $1::int "+m) }, want{1, classify.ReasonOutcomeUnknown}},
		{"writer RunTx, COMMIT lost", "commit", func(string) error {
			return f.RunTx(ctx, rw.Write(), pgx.TxOptions{}, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "INSERT INTO standby_lost VALUES ($1)", 1)
				return err
			})
		}, want{1, classify.ReasonOutcomeUnknown}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := layerSum(ctx, t, metrics, "holdfast.retries", "read")
			l.arm(tc.marker)
			err := tc.run(tc.marker)
			l.armed.Store(nil)
			runs := l.count(tc.marker)
			v := f.Classify(err)
			reruns := layerSum(ctx, t, metrics, "holdfast.retries", "read") - before
			outcome := "ok"
			if err != nil {
				outcome = fmt.Sprintf("%v (%v)", v, err)
			}
			t.Logf("MEASURED %s: sent %d times, %d re-run by the reader runner: %s", tc.name, runs, reruns, outcome)
			if runs != tc.want.runs {
				t.Errorf("sent %d times, want %d", runs, tc.want.runs)
			}
			switch {
			case tc.want.reason == "" && err != nil:
				t.Errorf("err = %v, want success on the re-run", err)
			case tc.want.reason != "" && v.Reason != tc.want.reason:
				t.Errorf("Classify = %v, want %s (%v)", v, tc.want.reason, err)
			case tc.want.reason == classify.ReasonOutcomeUnknown && v.Retryable(),
				tc.want.reason == classify.ReasonStandbyLost && (!v.Retryable() || errors.Is(err, holdfast.ErrOutcomeUnknown)):
				t.Errorf("Classify = %v, errors.Is(err, ErrOutcomeUnknown) %v", v, errors.Is(err, holdfast.ErrOutcomeUnknown))
			}
		})
	}
}

// dialOld dials as l.dial does, through a server that plays PostgreSQL
// 13: its startup reports server_version 13.99 and neither in_hot_standby
// nor default_transaction_read_only (they are reported from 14 on).
func (l *answerLoser) dialOld(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := l.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &olderServer{Conn: c}, nil
}

// olderServer rewrites the ParameterStatus messages of a server's startup,
// up to its first ReadyForQuery, as PostgreSQL 13 would send them.
type olderServer struct {
	net.Conn
	in, out []byte
	done    bool // the startup is over: the rest passes as it is
}

func (c *olderServer) Read(b []byte) (int, error) {
	for len(c.out) == 0 && !c.done {
		buf := make([]byte, 8192)
		n, err := c.Conn.Read(buf)
		c.in = append(c.in, buf[:n]...)
		for !c.done && len(c.in) >= 5 {
			size := 1 + int(binary.BigEndian.Uint32(c.in[1:5]))
			if len(c.in) < size {
				break
			}
			msg := c.in[:size:size]
			c.in = c.in[size:]
			if msg[0] == 'S' {
				name, _, _ := strings.Cut(string(msg[5:]), "\x00")
				switch name {
				case "in_hot_standby", "default_transaction_read_only":
					continue
				case "server_version":
					body := "server_version\x0013.99\x00"
					msg = binary.BigEndian.AppendUint32([]byte{'S'}, uint32(4+len(body)))
					msg = append(msg, body...)
				}
			}
			c.out = append(c.out, msg...)
			if msg[0] == 'Z' {
				c.done = true
				c.out, c.in = append(c.out, c.in...), nil
			}
		}
		if err != nil && len(c.out) == 0 {
			return 0, err
		}
	}
	if len(c.out) == 0 {
		return c.Conn.Read(b)
	}
	n := copy(b, c.out)
	c.out = c.out[n:]
	return n, nil
}

// TestIssue30StandbySoak is issue 30's soak, run when HOLDFAST_SOAK is a
// duration ("10m"): 8 workers reading through ReadWrite.Read (QueryRow,
// Query, read-only RunTx) while the readers crash and hang in turn, each
// found down, then recovered and found back. It logs the reads, those
// that failed and ended as outcome unknown, and the re-runs; none may
// end as outcome unknown.
func TestIssue30StandbySoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("HOLDFAST_SOAK"))
	if err != nil || d <= 0 {
		t.Skip("HOLDFAST_SOAK is not a duration: the soak runs on demand")
	}
	c := failovertest.StartTest(t, failovertest.Config{Replicas: 3})
	ctx, cancel := context.WithTimeout(context.Background(), d+5*time.Minute)
	defer cancel()
	readerUsers(ctx, t, c, "hf")
	metrics := sdkmetric.NewManualReader()
	f := newFactory(t, holdfast.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics))))
	wcfg, err := c.PoolConfig(c.ClusterEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	wcfg.ConnConfig.User = "hf"
	rw, err := f.NewReadWrite(ctx, wcfg, readerPoolConfig(t, c, "hf", 9))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rw.Close)
	m := f.Failover(rw.Reader())
	var hf standbyReads
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	wg := hf.run(wctx, f, func(ctx context.Context, i int) error {
		if i%3 == 2 {
			return f.RunTx(ctx, rw.Read(ctx), pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error { return readOn(ctx, tx, i/3) })
		}
		return readOn(ctx, rw.Read(ctx), i)
	}, 8, 10*time.Second)
	end := time.Now().Add(d)
	faults := 0
	for i := 0; time.Now().Before(end); i++ {
		id := c.Readers()[i%3]
		hang := i%2 == 1
		at := time.Now()
		if hang {
			err = c.HangReader(ctx, id)
		} else {
			err = c.CrashReader(ctx, id)
		}
		if err != nil {
			t.Fatal(err)
		}
		faults++
		if !waitFor(ctx, func() bool { return lastMonitorEvent(m.Status(), "reader down").After(at) }) {
			t.Fatalf("the monitor never found %s down", id)
		}
		time.Sleep(3 * time.Second)
		back := time.Now()
		if err := c.RecoverReader(ctx, id); err != nil {
			t.Fatal(err)
		}
		if !waitFor(ctx, func() bool { return lastMonitorEvent(m.Status(), "reader back").After(back) }) {
			t.Fatalf("the monitor never found %s back", id)
		}
		time.Sleep(2 * time.Second)
	}
	stop()
	wg.Wait()
	t.Logf("MEASURED soak of %v, %d reader faults (crash and hang in turn): %v; %d reads re-run (%d succeeded), %d read-only transactions re-run",
		d, faults, &hf, layerSum(ctx, t, metrics, "holdfast.retries", "read"), layerSum(ctx, t, metrics, "holdfast.recoveries", "read"),
		layerSum(ctx, t, metrics, "holdfast.retries", "transaction"))
	if n := hf.unknown.Load(); n > 0 {
		t.Errorf("%d reads ended as outcome unknown, want 0", n)
	}
}
