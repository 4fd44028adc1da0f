package failover

import (
	"fmt"
	"time"

	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/internal/typerule"
)

// HoldError says that a new connection was held while there was no
// server to send it to, and that none appeared within the hold's bound or
// the caller's context: by the writer endpoint while the writer was down
// and no new writer was known (Config.HoldTimeout), or, Reader true, by a
// reader pool with ReaderConfig.Hold while the topology named no usable
// reader (ReaderConfig.HoldTimeout). Nothing was sent: it is retryable
// (Rule: Transient "failover-held"; SafeToRetry), unless the caller's
// context ended it.
type HoldError struct {
	Host    string
	Waited  time.Duration
	Reader  bool  // a reader pool's hold: no usable reader
	Readers int   // Reader: the readers in the topology (every one lagging when > 0)
	Err     error // context.DeadlineExceeded or the caller's context error
}

func (e *HoldError) Error() string {
	if !e.Reader {
		return fmt.Sprintf("failover: connect to %s held for %v while the cluster had no writer, and none appeared: %v",
			e.Host, e.Waited.Round(time.Millisecond), e.Err)
	}
	why := "no reader in the topology"
	if e.Readers > 0 {
		why = fmt.Sprintf("all %d readers lag beyond MaxLag", e.Readers)
	}
	return fmt.Sprintf("failover: connect to %s held for %v: %s: %v", e.Host, e.Waited.Round(time.Millisecond), why, e.Err)
}

// Unwrap returns Err.
func (e *HoldError) Unwrap() error { return e.Err }

// SafeToRetry reports true: nothing was sent (see pgconn.SafeToRetry).
// holdfast's transaction runner relies on it: nothing of a transaction
// whose connect failed so reached a server.
func (e *HoldError) SafeToRetry() bool { return true }

// NotWriterError says that a new connection by the writer endpoint reached
// a server that is not the writer (stale DNS after a failover: the old
// writer, back as a reader, or a reader): holdfast refused it before any
// statement, and its retry goes to the writer. The factory's connect
// layer retries it itself, under its retry policy: a caller sees it when
// those retries are spent. Retryable (Rule: Transient).
type NotWriterError struct {
	Host string // the endpoint asked for
	Addr string // the server reached
	Why  string // "in hot standby", "a reader in the topology", "read-only"
}

func (e *NotWriterError) Error() string {
	return fmt.Sprintf("failover: connection by the writer endpoint %s reached %s, which is not the writer (%s): refused", e.Host, e.Addr, e.Why)
}

// CutError says that a connection to the old writer was closed because
// the cluster failed over: a statement or transaction on it did not
// complete. Nothing is resent. A transaction open on it was rolled back:
// it is Transient, and running the whole transaction again (holdfast's
// Factory.RunTx and sqldb.RunTx do) goes to the new writer.
// When what was in flight could commit by itself — a COMMIT, an autocommit
// statement — its outcome is unknown, as with any broken connection: the
// caller gets a *holdfast.OutcomeUnknownError wrapping the CutError, Fatal
// "outcome-unknown", never to be resent blindly; on a reader (a server in
// hot standby, where nothing commits) an error wrapping the CutError that
// holdfast.Factory.Classify says is Transient "lost-on-standby".
//
// A connection to an instance that left the cluster's topology is cut the
// same way; OldWriter and NewWriter are then empty and Left is its id. So
// is a connection to a reader that stopped answering the monitor (crashed,
// hung): Down is its id, and Why what the monitor's probe saw.
type CutError struct {
	OldWriter string // server id
	NewWriter string // server id
	Left      string // server id of an instance that left the topology
	Down      string // server id of a reader found down
	Why       string // Down: "refused", "reset", "timeout", "EOF", "network error" or "SQLSTATE 57…"
	Addr      string // the server's address
	Err       error  // the network error that surfaced it
}

func (e *CutError) Error() string {
	if e.Down != "" {
		why := ""
		if e.Why != "" {
			why = " (" + e.Why + ")"
		}
		return fmt.Sprintf("failover: connection to %s closed: reader %s down%s, it stopped answering (a transaction open on it was rolled back)",
			e.Addr, e.Down, why)
	}
	if e.NewWriter == "" {
		return fmt.Sprintf("failover: connection to %s (%s) closed: the instance left the cluster's topology (a transaction open on it was rolled back)",
			e.Left, e.Addr)
	}
	return fmt.Sprintf("failover: connection to the old writer %s (%s) closed: the cluster failed over to %s (a transaction open on it was rolled back)",
		e.OldWriter, e.Addr, e.NewWriter)
}

// Unwrap returns Err.
func (e *CutError) Unwrap() error { return e.Err }

// WriterRegionError says that a write was refused because an Aurora
// Global Database's writer is in another Region than the read-only
// instance the pool reached (Err, a *pgconn.PgError 25006, or nil when no
// instance was usable). Nothing was written. It is not retryable (Rule:
// Fatal): the pool reaches the same Region until the writer comes back to
// it. Two ways lead there:
//
//   - OutOfHome false: the pool's endpoint is a secondary Region's cluster
//     (writer) endpoint, which Aurora keeps inactive while the writer is in
//     another Region: it leads to a read-only instance of Region. Write
//     through the global writer endpoint, or give the pool
//     failover.FollowWriter (InstancePools or holdfast.PoolInstanceMode)
//     to follow the writer across Regions. Reason
//     "failover-inactive-endpoint".
//   - OutOfHome true: a pool meant for writes while the writer is outside
//     GlobalConfig.HomeRegion (Region), with OutOfHomeReadOnly: the pool
//     reads on the home Region's readers, and no connection reaches the
//     writer. Reason "failover-writer-out-of-home".
//
// holdfast's transaction runner (Factory.RunTx, sqldb.RunTx) returns it;
// on an inactive endpoint, a statement run on the pool directly returns
// the server's 25006 as pgx does, once (the connection is kept, the
// monitor not woken: a read-only instance there is no failover).
type WriterRegionError struct {
	Host         string // the pool's endpoint
	Region       string // the Region the pool reached: the endpoint's, or the home Region
	WriterRegion string // the writer's Region now
	Writer       string // the writer's server id now
	OutOfHome    bool   // read-only out of home (OutOfHomeReadOnly), not an inactive endpoint
	Err          error
}

func (e *WriterRegionError) Error() string {
	if e.OutOfHome {
		msg := fmt.Sprintf("failover: write through %s refused: the writer (%s) is in %s, outside the home Region %s, and the pool is read-only meanwhile (OutOfHomeReadOnly)",
			e.Host, e.Writer, e.WriterRegion, e.Region)
		if e.Err != nil {
			msg += ": " + e.Err.Error()
		}
		return msg
	}
	writer := "the writer"
	if e.Writer != "" {
		writer += " (" + e.Writer + ")"
	}
	return fmt.Sprintf("failover: write through %s refused: it is the cluster endpoint of %s, a secondary Region of the global cluster, inactive while %s is in %s; write through the global writer endpoint: %v",
		e.Host, e.Region, writer, e.WriterRegion, e.Err)
}

// Unwrap returns Err.
func (e *WriterRegionError) Unwrap() error { return e.Err }

// Rule classifies this package's errors for package classify; holdfast's
// factory installs it with WithFailover. Its verdicts (the reasons are
// what metrics, logs and retry errors show):
//
//	error                          class      reason
//	-----------------------------  ---------  ---------------------------
//	*HoldError                     Transient  failover-held
//	*NotWriterError                Transient  failover-not-writer
//	*CutError                      Transient  failover-cut
//	*WriterRegionError             Fatal      failover-inactive-endpoint
//	*WriterRegionError, OutOfHome  Fatal      failover-writer-out-of-home
//
// A hold the caller's own context canceled is left to the other rules
// (classify: Fatal "canceled").
func Rule(err error) (classify.Verdict, bool) { return rule(err) }

var rule = typerule.Rule(
	typerule.Wait[*HoldError]("failover-held"),
	typerule.Of[*NotWriterError](classify.Transient, "failover-not-writer"),
	typerule.Of[*CutError](classify.Transient, "failover-cut"),
	typerule.When(func(e *WriterRegionError) bool { return e.OutOfHome }, classify.Fatal, "failover-writer-out-of-home"),
	typerule.Of[*WriterRegionError](classify.Fatal, "failover-inactive-endpoint"),
)
