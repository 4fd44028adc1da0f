package faults_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/retry"
)

// load is a workload of 16 goroutines on one pool. Each runs requests; a
// request is one transaction inserting the row (id, attempt), where id is
// unique to the request and attempt is the run's. Through holdfast
// (runner) the request is f.BeginTxFunc, which runs the transaction again
// only when nothing of it committed; the control is the loop an
// application writes by hand: a failed request is tried once more, 50 ms
// later, when classify.Classify says the failure is transient. A
// statement the library sent twice would show as two rows with the same
// (id, attempt); a transaction applied twice, as rows of two attempts.
type load struct {
	name   string
	pool   *pgxpool.Pool
	f      *holdfast.Factory // runner: its transaction runner runs the requests
	runner bool
	table  string

	mu   sync.Mutex
	reqs []request
}

// request is one request's record.
type request struct {
	worker       int
	id           int64
	attempt      int // the run that succeeded; 0: the request failed
	began, ended time.Time
	err          error // the last failure, if any
	unknown      bool  // it failed with holdfast.ErrOutcomeUnknown: a COMMIT sent, its answer lost
}

const (
	workers        = 16
	callerAttempts = 2 // the caller's retry: one more attempt
)

var requestSeq atomic.Int64

// request runs one request: through the runner, or with the caller's
// retry.
func (l *load) request(worker int, timeout time.Duration) request {
	r := request{worker: worker, id: requestSeq.Add(1), began: time.Now()}
	if l.runner {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		runs := 0
		err := l.f.RunTx(ctx, l.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
			runs++
			_, err := tx.Exec(ctx, "INSERT INTO "+l.table+" (id, attempt) VALUES ($1, $2)", r.id, runs)
			return err
		})
		cancel()
		if err == nil {
			r.attempt = runs
		}
		r.err, r.unknown, r.ended = err, errors.Is(err, holdfast.ErrOutcomeUnknown), time.Now()
		return r
	}
	for a := 1; a <= callerAttempts; a++ {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO "+l.table+" (id, attempt) VALUES ($1, $2)", r.id, a)
			return err
		})
		cancel()
		if err == nil {
			r.attempt, r.err = a, nil
			break
		}
		r.err = err
		if !classify.Classify(err).Retryable() || a == callerAttempts {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.ended = time.Now()
	return r
}

// underLoad runs loads at once: once every worker of every load has
// succeeded, it runs fault, then lets the workers go on for after, then
// stops them. It returns when fault began and when it returned.
func underLoad(t *testing.T, timeout time.Duration, fault func(), after time.Duration, loads ...*load) (began, ended time.Time) {
	t.Helper()
	var warm atomic.Int64 // workers that have succeeded once
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, l := range loads {
		for w := range workers {
			wg.Go(func() {
				warmed := false
				for range 5000 { // bounded: the loop stops long before
					select {
					case <-stop:
						return
					default:
					}
					r := l.request(w, timeout)
					l.mu.Lock()
					l.reqs = append(l.reqs, r)
					l.mu.Unlock()
					if r.attempt != 0 && !warmed {
						warmed = true
						warm.Add(1)
					}
				}
			})
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for warm.Load() < int64(workers*len(loads)) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling a measured condition, bounded
	}
	if warm.Load() < int64(workers*len(loads)) {
		close(stop)
		wg.Wait()
		t.Fatal("the workers did not all succeed before the fault")
	}
	began = time.Now()
	fault()
	ended = time.Now()
	time.Sleep(after)
	close(stop)
	wg.Wait()
	return began, ended
}

// loadFigures are a load's figures from the fault on.
type loadFigures struct {
	requests    int           // requests that ended after the fault began
	failed      int           // of which failed after the retries (an unknown outcome aside)
	unknown     int           // of which failed with holdfast.ErrOutcomeUnknown
	budget      int           // of which failed because the retry budget ran out (retry.ErrBudgetExhausted)
	retried     int           // of which the caller retried
	slowest     time.Duration // the longest of them, the caller's retry included
	recovered   time.Duration // from the fault's start until every worker had a success after the fault ended
	firstFailed error         // the first failure, for the log
}

// figures returns l's figures for a fault from began to ended.
func (l *load) figures(began, ended time.Time) loadFigures {
	l.mu.Lock()
	defer l.mu.Unlock()
	var fg loadFigures
	served := map[int]time.Time{} // by worker: its first success after the fault ended
	for _, r := range l.reqs {
		if r.ended.Before(began) {
			continue
		}
		fg.requests++
		switch {
		case r.unknown:
			fg.unknown++
		case r.attempt == 0 && errors.Is(r.err, retry.ErrBudgetExhausted):
			fg.budget++
		case r.attempt == 0:
			fg.failed++
			if fg.firstFailed == nil {
				fg.firstFailed = r.err
			}
		}
		if r.attempt != 1 {
			fg.retried++
		}
		fg.slowest = max(fg.slowest, r.ended.Sub(r.began))
		if r.attempt != 0 && !r.ended.Before(ended) {
			if at, ok := served[r.worker]; !ok || r.ended.Before(at) {
				served[r.worker] = r.ended
			}
		}
	}
	fg.recovered = -1 // some worker was never served again
	if len(served) == workers {
		for _, at := range served {
			fg.recovered = max(fg.recovered, at.Sub(began))
		}
	}
	return fg
}

func (fg loadFigures) String() string {
	rec := "never"
	if fg.recovered >= 0 {
		rec = fg.recovered.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%d requests, %d failed, %d stopped by the retry budget, %d outcome unknown, %d retried, slowest %v, every worker served again %s after the fault began",
		fg.requests, fg.failed, fg.budget, fg.unknown, fg.retried, fg.slowest.Round(time.Millisecond), rec)
}

// checkRows checks l's table against its requests: no (id, attempt) twice
// (no statement resent below the caller) and every succeeded request's row
// present (no commit lost). It returns how many requests have rows of two
// attempts: a commit whose reply was lost, which the caller sent again.
func (l *load) checkRows(t *testing.T, db *pgx.Conn) (ambiguous int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := db.Query(ctx, "SELECT id, attempt, count(*) FROM "+l.table+" GROUP BY id, attempt")
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		id      int64
		attempt int
	}
	have := map[key]bool{}
	attempts := map[int64]int{}
	for rows.Next() {
		var k key
		var n int
		if err := rows.Scan(&k.id, &k.attempt, &n); err != nil {
			t.Fatal(err)
		}
		if n > 1 {
			t.Errorf("%s: request %d attempt %d inserted %d times: a statement was resent", l.name, k.id, k.attempt, n)
		}
		have[k] = true
		attempts[k.id]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.reqs {
		if r.attempt != 0 && !have[key{r.id, r.attempt}] {
			t.Errorf("%s: request %d succeeded at attempt %d, and its row is missing", l.name, r.id, r.attempt)
		}
	}
	for _, n := range attempts {
		if n > 1 {
			ambiguous++
		}
	}
	return ambiguous
}

// createTable creates a load's table on db.
func createTable(t *testing.T, db *pgx.Conn, name string) {
	t.Helper()
	if _, err := db.Exec(context.Background(), "CREATE TABLE "+name+" (id bigint NOT NULL, attempt int NOT NULL)"); err != nil {
		t.Fatal(err)
	}
}

// connect returns a connection to dsn, closed by the test's cleanup.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// Established connections reset under load: for 100 ms the proxy cuts
// every connection that sends (reset_peer: the statement never reaches the
// server), new ones included, while 16 goroutines per pool run
// transactions with the caller's retry (one more attempt, when f.Classify
// says transient). Through holdfast (retry.Default, retry.DefaultBudget)
// every request succeeds, within 3 s, and no statement is resent; plain
// pgxpool, the control, is measured alongside under the same fault.
func TestResetUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("resets connections under load: skipped with -short")
	}
	t.Parallel()
	dsn, addr := serverAddr(t)
	p := newProxy(t, addr)
	db := connect(t, dsn)
	f, b := newHoldfast(t, retry.Default())
	hd, cd := &dialCounter{}, &dialCounter{}
	hl := &load{name: "holdfast", f: f, runner: true, table: tableName("reset"),
		pool: holdfastPool(t, f, configAt(t, dsn, p.addr, hd, "&pool_max_conns=8"))}
	cl := &load{name: "control: plain pgxpool", f: f, table: tableName("reset"),
		pool: plainPool(t, configAt(t, dsn, p.addr, cd, "&pool_max_conns=8"))}
	createTable(t, db, hl.table)
	createTable(t, db, cl.table)
	var before [2]int64
	began, ended := underLoad(t, 2*time.Second, func() {
		before = [2]int64{hd.dials(), cd.dials()}
		p.toxic(t, "reset_peer", "upstream", `"timeout":0`)
		time.Sleep(100 * time.Millisecond)
		p.clear()
	}, time.Second, hl, cl)
	for i, l := range []*load{hl, cl} {
		fg := l.figures(began, ended)
		amb := l.checkRows(t, db)
		dials := []int64{hd.dials(), cd.dials()}[i] - before[i]
		t.Logf("MEASURED %s: %v; %d dials from the fault on; %d ambiguous commits", l.name, fg, dials, amb)
		if l == hl {
			t.Logf("MEASURED holdfast: %d retries below the caller", b.Retries())
			if fg.failed != 0 {
				t.Errorf("holdfast: %d requests failed after the runner's re-runs, first: %v", fg.failed, fg.firstFailed)
			}
			if amb != 0 {
				t.Errorf("holdfast: %d transactions applied twice", amb)
			}
			within(t, "holdfast: the slowest request", fg.slowest, 3*time.Second)
			if fg.recovered < 0 {
				t.Error("holdfast: some worker was never served again")
			}
		}
	}
}
