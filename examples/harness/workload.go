package harness

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-db/holdfast/examples/timeline"
)

// Record is one request of a client.
type Record struct {
	ID         int64 // the request's id, for the demos that write one
	Start, End time.Time
	Err        string // the error's key (Config.ErrorKey), "" when it succeeded
	Server     string // the server that answered, for the demos that ask; "" when it failed
	Attempts   int    // runs of the transaction
	Unknown    bool   // its COMMIT's outcome was unknown (holdfast.ErrOutcomeUnknown), then resolved
}

// Took is the request's time, retries included.
func (r Record) Took() time.Duration { return r.End.Sub(r.Start) }

// Request runs one request of a worker, bounded by ctx; it fills in r
// (ID, Server, Attempts, Unknown) as it goes.
type Request func(ctx context.Context, worker int, r *Record) error

// Client is one pool under the workload: its name, its request and, once
// it ran, its records.
type Client struct {
	Name    string
	Request Request
	// Writer is how a write demo's client runs its transactions (its
	// Request uses it); nil in the others.
	Writer *Writer
	// Recs are its records, per worker, in the order they ended.
	Recs [][]Record

	ok, failed atomic.Int64
	mu         sync.Mutex // guards Recs while the workers run
}

// Records returns every record, worker after worker.
func (c *Client) Records() []Record {
	var all []Record
	for _, recs := range c.Recs {
		all = append(all, recs...)
	}
	return all
}

// Acks are the times its acknowledged requests (those that succeeded)
// finished, worker after worker.
func (c *Client) Acks() []time.Time {
	var acks []time.Time
	for _, recs := range c.Recs {
		for _, r := range recs {
			if r.Err == "" {
				acks = append(acks, r.End)
			}
		}
	}
	return acks
}

// LongestGap is the longest time between begin, the acknowledgements
// (sorted in place) and end: its start and its end (the first of the
// longest). A write demo's longest pause is its length.
func LongestGap(begin, end time.Time, acks []time.Time) (from, to time.Time) {
	slices.SortFunc(acks, func(a, b time.Time) int { return a.Compare(b) })
	from, to = begin, begin
	prev := begin
	for _, a := range acks {
		if a.Sub(prev) > to.Sub(from) {
			from, to = prev, a
		}
		prev = a
	}
	if end.Sub(prev) > to.Sub(from) {
		from, to = prev, end
	}
	return from, to
}

// Series is the client's requests for a chart (package examples/timeline),
// by the time they finished, from begin; the pause is left to the demo.
func (c *Client) Series(begin time.Time) timeline.Series {
	s := timeline.Series{Name: c.Name}
	for _, recs := range c.Recs {
		for _, rec := range recs {
			s.Requests = append(s.Requests, timeline.Request{End: rec.End.Sub(begin), OK: rec.Err == ""})
		}
	}
	return s
}

// PauseSeries is [Client.Series] with its pause: the longest time without
// an acknowledged request from begin to stopAt ([LongestGap]), labelled
// with its length.
func (c *Client) PauseSeries(begin, stopAt time.Time) timeline.Series {
	s := c.Series(begin)
	from, to := LongestGap(begin, stopAt, c.Acks())
	s.Pause = &timeline.Span{From: from.Sub(begin), To: to.Sub(begin), Label: fmt.Sprintf("longest pause %.0f ms", MS(to.Sub(from)))}
	return s
}

// Failures are the clients' failed requests for a chart's subtitle: "NAME
// FAILED of REQUESTS", comma-separated.
func Failures[C Counted](clients []C) string {
	var counts []string
	for _, c := range clients {
		n := c.counts()
		counts = append(counts, fmt.Sprintf("%s %d of %d", n.Name, n.Failed, n.Requests))
	}
	return strings.Join(counts, ", ")
}

// Committed is whether an id is among ids, the ids committed on the
// writer: the argument of [Client.Writes].
func Committed(ids []int64) func(id int64) bool {
	set := make(map[int64]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	return func(id int64) bool { return set[id] }
}

// loop runs requests until stop is closed: one after the other, Think
// apart, or with Every one every Every, each on a goroutine of its own
// (it waits for them before it returns).
func (c *Client) loop(worker int, stop <-chan struct{}, cfg Config) {
	if cfg.Every > 0 {
		var inflight sync.WaitGroup
		defer inflight.Wait()
		t := time.NewTicker(cfg.Every)
		defer t.Stop()
		for {
			inflight.Go(func() { c.request(worker, cfg) })
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		c.request(worker, cfg)
		t.Reset(cfg.Think)
	}
}

// request runs one request of worker and records it.
func (c *Client) request(worker int, cfg Config) {
	r := Record{Start: time.Now()}
	// Each request is bounded; the stop signal never cancels one midway.
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	err := c.Request(ctx, worker, &r)
	cancel()
	r.End = time.Now()
	if err != nil {
		r.Err, r.Server = cfg.ErrorKey(err), ""
		c.failed.Add(1)
	} else {
		c.ok.Add(1)
	}
	c.mu.Lock()
	c.Recs[worker] = append(c.Recs[worker], r)
	c.mu.Unlock()
}

// Config is how a workload runs.
type Config struct {
	Workers int           // per client
	Think   time.Duration // pause between a worker's requests
	// Every, when set, makes the workers open-loop: each starts a request
	// every Every, whether or not its previous one ended (as a service's
	// callers do), instead of one after the other, Think apart. A fault
	// that freezes requests then still sees new ones.
	Every   time.Duration
	Timeout time.Duration // bound of each request
	// ErrorKey names a failed request's error: its SQLSTATE, else its
	// class and reason.
	ErrorKey func(error) string
}

// Workload is the clients' workers at work, and the goroutines that watch
// them (the progress lines, samplers).
type Workload struct {
	Begin time.Time // when the workers started

	clients        []*Client
	stop, done     chan struct{}
	workers, watch sync.WaitGroup
	once           sync.Once
	stopAt         time.Time
}

// Start starts cfg.Workers workers per client, each running the client's
// request one after the other, cfg.Think apart (or, with cfg.Every, one
// every Every), until [Workload.Stop].
func Start(clients []*Client, cfg Config) *Workload {
	w := &Workload{clients: clients, stop: make(chan struct{}), done: make(chan struct{}), Begin: time.Now()}
	for _, c := range clients {
		c.Recs = make([][]Record, cfg.Workers)
		for i := range cfg.Workers {
			w.workers.Go(func() { c.loop(i, w.stop, cfg) })
		}
	}
	return w
}

// Go runs f until the workers have stopped: done is closed then.
func (w *Workload) Go(f func(done <-chan struct{})) { w.watch.Go(func() { f(w.done) }) }

// Stop tells the workers to stop and waits for them (each finishes its
// request), then for the goroutines of [Workload.Go]; it returns when it
// told the workers. Calls after the first return the same.
func (w *Workload) Stop() time.Time {
	w.once.Do(func() {
		close(w.stop)
		w.stopAt = time.Now()
		w.workers.Wait()
		close(w.done)
		w.watch.Wait()
	})
	return w.stopAt
}

// Play plays a demo's fault under the workload: it waits warmup, runs
// fault, waits settle, then stops the workload ([Workload.Stop]). It
// returns when it told the workers to stop, when they and the watchers
// had stopped, and the first error (the steps after it skipped).
func (w *Workload) Play(ctx context.Context, warmup, settle time.Duration, fault func() error) (stopAt, end time.Time, err error) {
	err = Sleep(ctx, warmup)
	if err == nil {
		err = fault()
	}
	if err == nil {
		err = Sleep(ctx, settle)
	}
	stopAt = w.Stop()
	return stopAt, time.Now(), err
}

// Count is a client's requests that succeeded and failed in the second of
// a progress line.
type Count struct {
	Name       string
	OK, Failed int64
}

// Progress prints a progress line a second on out until the workers have
// stopped: the seconds since the start ("%5.1fs"), then what line writes,
// given each client's requests of that second.
func (w *Workload) Progress(out io.Writer, line func(b *strings.Builder, counts []Count)) {
	w.Go(func(done <-chan struct{}) {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last := make([]Count, len(w.clients))
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			counts := make([]Count, len(w.clients))
			for i, c := range w.clients {
				ok, failed := c.ok.Load(), c.failed.Load()
				counts[i] = Count{Name: c.Name, OK: ok - last[i].OK, Failed: failed - last[i].Failed}
				last[i] = Count{OK: ok, Failed: failed}
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%5.1fs", time.Since(w.Begin).Seconds())
			line(&b, counts)
			fmt.Fprintln(out, b.String())
		}
	})
}

// WriteCounts writes each client's part of a progress line:
// " | NAME ok N fail N".
func WriteCounts(b *strings.Builder, counts []Count) {
	for _, c := range counts {
		fmt.Fprintf(b, " | %-8s ok %4d fail %4d", c.Name, c.OK, c.Failed)
	}
}

// SyncWriter serialises the writes to w: for progress lines and a demo's
// own messages written at once.
func SyncWriter(w io.Writer) io.Writer { return &syncWriter{w: w} }

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// MS is d in ms, to the µs.
func MS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Sleep waits d, or until ctx ends (its error then).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
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
