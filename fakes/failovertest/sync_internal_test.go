package failovertest

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast-db/holdfast/fakes/internal/pgnode"
	"github.com/jackc/pgx/v5"
)

// TestCommitWaitsForReplica shows that replication is synchronous: with the
// replica down a commit on the writer does not return, and it returns once
// the replica is back, with the row on it.
func TestCommitWaitsForReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of real servers: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Start(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	w, r := c.writer, c.standbys[0]
	if err := w.Exec(ctx, "CREATE TABLE t (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	committed := make(chan error, 1)
	go func() { committed <- w.Exec(ctx, "INSERT INTO t VALUES (1)") }()
	select {
	case err := <-committed:
		t.Fatalf("commit returned with the replica down: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, r.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// Flushed there before the commit returned; applied soon after.
	var n int
	err = pgnode.Poll(ctx, func() (bool, error) {
		err := conn.QueryRow(ctx, "SELECT count(*) FROM t WHERE id = 1").Scan(&n)
		return n == 1, err
	})
	if err != nil || n != 1 {
		t.Fatalf("row on the replica: %d, %v", n, err)
	}
}

// TestTargetCatchesUp: a crash that promotes a chosen standby which
// missed commits (they waited for the other standby only, ANY 1) keeps
// every acknowledged commit: the target streams the rest from the other
// standby before its promotion, as Aurora's shared storage would have it.
func TestTargetCatchesUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of real servers: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := Start(ctx, Config{Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	w, target := c.writer, c.standbys[0]
	if err := w.Exec(ctx, "CREATE TABLE t (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	// The target stops streaming (its primary is a closed port): the next
	// commits wait for the other standby.
	if err := target.Follow(ctx, &pgnode.Node{Host: "127.0.0.1", Port: 1}, true); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := w.Exec(ctx, "INSERT INTO t VALUES ($1)", i); err != nil {
			t.Fatal(err)
		}
	}
	res, err := c.Failover(ctx, Scenario{Kind: Crash, Target: target.ID})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := c.CommittedIDs(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if res.NewWriter != target.ID || len(ids) != 20 {
		t.Fatalf("new writer %s with %d of the 20 acknowledged rows; want %s with all", res.NewWriter, len(ids), target.ID)
	}
}
