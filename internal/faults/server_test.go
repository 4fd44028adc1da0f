package faults_test

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/retry"
)

// A server restarted under load (pg_ctl restart -m fast: sessions end with
// 57P01; -m immediate: they are killed, and the server recovers from its
// WAL), 16 goroutines per pool, each request one transaction: through
// holdfast's runner (retry.Default), which re-runs what did not commit,
// and through plain pgxpool with a caller's retry once more, 50 ms later,
// when classify.Classify says transient. Through holdfast no request fails
// but those whose COMMIT was in flight (outcome unknown, never re-run) and
// those whose re-runs the retry budget refused (fewer than the control's
// failures); no statement is resent and no transaction applied twice;
// plain pgxpool, under the same restart, has requests fail.
func TestRestartUnderLoad(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"fast", "immediate"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			// synchronous_commit on: a commit reported is on disk, so that
			// every succeeded request's row survives the immediate restart.
			s := ownServer(t, map[string]string{"synchronous_commit": "on"})
			dsn := s.DSN()
			f, b := newHoldfast(t, retry.Default())
			hd, cd := &dialCounter{}, &dialCounter{}
			hl := &load{name: "holdfast", f: f, runner: true, table: tableName("restart"),
				pool: holdfastPool(t, f, configAt(t, dsn, s.Addr(), hd, "&pool_max_conns=8"))}
			cl := &load{name: "control: plain pgxpool", f: f, table: tableName("restart"),
				pool: plainPool(t, configAt(t, dsn, s.Addr(), cd, "&pool_max_conns=8"))}
			{
				db := connect(t, dsn)
				createTable(t, db, hl.table)
				createTable(t, db, cl.table)
				db.Close(context.Background())
			}
			var down time.Duration
			var before [2]int64
			began, ended := underLoad(t, 5*time.Second, func() {
				before = [2]int64{hd.dials(), cd.dials()}
				down = pgCtl(t, s, "-m", mode, "-w", "-t", "60", "restart")
			}, 2*time.Second, hl, cl)
			t.Logf("MEASURED %s: pg_ctl restart took %v", mode, down.Round(time.Millisecond))
			db := connect(t, dsn)
			var failed, twice, budget [2]int
			for i, l := range []*load{hl, cl} {
				fg := l.figures(began, ended)
				failed[i], budget[i] = fg.failed, fg.budget
				amb := l.checkRows(t, db)
				twice[i] = amb
				dials := []int64{hd.dials(), cd.dials()}[i] - before[i]
				t.Logf("MEASURED %s %s: %v; %d dials from the restart on; %d ambiguous commits", mode, l.name, fg, dials, amb)
				if fg.firstFailed != nil {
					t.Logf("MEASURED %s %s: the first failure was %s", mode, l.name, outcome(f, fg.firstFailed))
				}
			}
			t.Logf("MEASURED %s holdfast: %d retries below the caller", mode, b.Retries())
			// What fails through holdfast: a COMMIT in flight (outcome
			// unknown, never re-run), and requests whose re-runs the retry
			// budget refused (16 workers' connects spend its 20 retries
			// within the restart: it is sized for outages).
			if failed[0] != 0 || twice[0] != 0 {
				t.Errorf("holdfast: %d requests failed after the runner's re-runs (an unknown outcome or the budget aside), %d applied twice", failed[0], twice[0])
			}
			if budget[0] >= failed[1]+budget[1] {
				t.Errorf("holdfast: %d requests stopped by the budget, not fewer than the control's %d failures", budget[0], failed[1]+budget[1])
			}
			if failed[1] == 0 {
				t.Errorf("control: no request failed; the restart does not bite")
			}
		})
	}
}

// A frozen server (its postmaster stopped with SIGSTOP for 2 s, then
// SIGCONT; its sessions' processes run on): established connections keep
// working; a new connection through holdfast fails transient within the
// policy (3 attempts of 300 ms) and connects right after the thaw, where
// plain pgxpool's hangs until the thaw.
func TestFrozenServer(t *testing.T) {
	if testing.Short() {
		t.Skip("freezes a real server and waits out the timeouts: skipped with -short")
	}
	t.Parallel()
	s := ownServer(t, nil)
	pid := postmasterPID(t, s)
	thaw := func() {
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(thaw) // before the server's Stop
	dsn := s.DSN()
	policy := testPolicy()
	policy.AttemptTimeout = 300 * time.Millisecond
	f, b := newHoldfast(t, policy)
	established := holdfastPool(t, f, configAt(t, dsn, s.Addr(), nil, ""))
	if _, err := ping(established, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	hd, cd := &dialCounter{}, &dialCounter{}
	hp := holdfastPool(t, f, configAt(t, dsn, s.Addr(), hd, ""))
	cp := plainPool(t, configAt(t, dsn, s.Addr(), cd, ""))

	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	var thawed time.Time
	var wg sync.WaitGroup
	var controlErr error
	var controlTook time.Duration
	wg.Go(func() { controlTook, controlErr = ping(cp, 10*time.Second) })
	var pings []time.Duration // holdfast's, until one succeeds
	var okAt time.Time
	wg.Go(func() {
		for range 20 { // bounded: about 2 s of 1 s pings
			took, err := ping(hp, 10*time.Second)
			pings = append(pings, took)
			if err == nil {
				okAt = time.Now()
				return
			}
			if v := f.Classify(err); !v.Retryable() {
				t.Errorf("a connect to the frozen server: Classify = %v, want transient", v)
			}
		}
	})
	took, err := ping(established, 10*time.Second)
	t.Logf("MEASURED established connection while frozen: %s in %v", outcome(f, err), took.Round(time.Millisecond))
	if err != nil {
		t.Errorf("an established connection failed while only the postmaster was frozen: %v", err)
	}
	time.Sleep(time.Until(frozen.Add(4 * time.Second))) // more than one connect's attempts: 300, 600, 1200 ms
	thawed = time.Now()
	thaw()
	wg.Wait()

	var slowest time.Duration
	for _, d := range pings[:len(pings)-1] {
		slowest = max(slowest, d)
	}
	t.Logf("MEASURED holdfast: %d pings while frozen, each failed within %v; %d dials; %d retries; first success %v after the thaw",
		len(pings)-1, slowest.Round(time.Millisecond), hd.dials(), b.Retries(), okAt.Sub(thawed).Round(time.Millisecond))
	t.Logf("MEASURED control: plain pgxpool: 1 ping returned %v after the freeze (%v after the thaw), %s; %d dials",
		controlTook.Round(time.Millisecond), frozen.Add(controlTook).Sub(thawed).Round(time.Millisecond), outcome(f, controlErr), cd.dials())
	if len(pings) < 2 {
		t.Errorf("holdfast connected while the postmaster was frozen")
	}
	within(t, "holdfast: a connect to the frozen server", slowest, 3*time.Second) // 300 + 600 + 1200 ms + 30 ms of backoff
	if okAt.IsZero() {
		t.Fatal("holdfast never connected after the thaw")
	}
	within(t, "holdfast: the first connect after the thaw", okAt.Sub(thawed), time.Second)
	if controlTook < 3900*time.Millisecond {
		t.Errorf("control: plain pgxpool's connect returned after %v, before the thaw: the fault does not bite", controlTook)
	}
}
