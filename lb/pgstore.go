package lb

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Advisory lock namespaces (the first key of the two-int4 form): one for
// group locks, one for schema creation.
const (
	lockNamespace   int32 = 0x68666c62 // "hflb"
	schemaNamespace int32 = 0x68666c73 // "hfls"
)

// Tables, created if missing by [NewPGStore].
const schemaSQL = `
CREATE TABLE IF NOT EXISTS holdfast_lb_lock (
	group_name  text PRIMARY KEY,
	owner       text NOT NULL,
	host        text NOT NULL,
	since       timestamptz NOT NULL,
	backend_pid integer NOT NULL,
	lock_key    integer NOT NULL
);
CREATE TABLE IF NOT EXISTS holdfast_lb_audit (
	id          bigserial PRIMARY KEY,
	started_at  timestamptz NOT NULL,
	finished_at timestamptz,
	duration_ms double precision NOT NULL DEFAULT 0,
	operator    text NOT NULL,
	host        text NOT NULL,
	action      text NOT NULL,
	group_name  text NOT NULL,
	nodes       text[] NOT NULL,
	members     jsonb NOT NULL,
	result      text NOT NULL,
	error       text NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS holdfast_lb_audit_group ON holdfast_lb_audit (group_name, id);
`

// ErrStore is matched by every [*StoreError].
var ErrStore = errors.New("lb: database")

// StoreError is a failed database operation of a [*PGStore]. Whether it is
// retryable depends on Err (see holdfast's classify package).
type StoreError struct {
	Op  string // "create tables", "lock", "holder", "audit", ...
	Err error
}

// Error returns "lb: database: <Op>: <Err>".
func (e *StoreError) Error() string { return "lb: database: " + e.Op + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *StoreError) Unwrap() error { return e.Err }

// Is matches [ErrStore].
func (e *StoreError) Is(target error) bool { return target == ErrStore }

// PGStore keeps group locks and the audit trail in PostgreSQL. It
// implements [Locker] and [AuditLog].
//
// # Locks
//
// A group lock is a session-level advisory lock,
// pg_try_advisory_lock(0x68666c62, fnv32a(group)), taken on a connection
// hijacked from the pool and held by the [Lease] until Release, plus a row
// in holdfast_lb_lock (group, owner, host, since, backend pid) so that
// everyone can see the holder. When the holder crashes, its session ends,
// PostgreSQL releases the advisory lock, and the row no longer counts:
// holders are only reported while the backend named in the row still holds
// the lock. Two group names may share a lock key (32-bit hash); they then
// exclude each other, which is safe, and the refusal says so.
//
// # Audit
//
// Every [Entry] is a row of holdfast_lb_audit; members are stored as
// jsonb.
//
// A PGStore is safe for concurrent use. It does not own the pool.
type PGStore struct {
	pool *pgxpool.Pool
	host string
}

// NewPGStore creates the tables if they are missing (holding an advisory
// transaction lock, so concurrent first runs do not collide) and returns a
// store using pool.
func NewPGStore(ctx context.Context, pool *pgxpool.Pool) (*PGStore, error) {
	if pool == nil {
		return nil, &ConfigError{Pkg: "lb", Field: "pool", Why: "must not be nil"}
	}
	host, _ := os.Hostname()
	s := &PGStore{pool: pool, host: host}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, 0)", schemaNamespace); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, schemaSQL)
		return err
	})
	if err != nil {
		return nil, &StoreError{Op: "create tables", Err: err}
	}
	return s, nil
}

// WithHost returns a store like s (the same pool) whose locks name host
// as their holder's machine instead of os.Hostname(), for a process that
// records another name in its audit trail (ControllerConfig.Host).
func (s *PGStore) WithHost(host string) *PGStore {
	c := *s
	c.host = host
	return &c
}

// lockKey returns the second advisory lock key of group.
func lockKey(group string) int32 {
	h := fnv.New32a()
	h.Write([]byte(group))
	return int32(h.Sum32())
}

const holderSQL = `
SELECT l.group_name, l.owner, l.host, l.since, l.backend_pid
FROM holdfast_lb_lock l
WHERE l.lock_key = $2 AND EXISTS (
	SELECT 1 FROM pg_locks p
	WHERE p.locktype = 'advisory' AND p.granted AND p.pid = l.backend_pid
	  AND p.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	  AND p.classid = $1::bigint::oid AND p.objid = $3::bigint::oid AND p.objsubid = 2)
ORDER BY l.since DESC
LIMIT 1`

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func holderOf(ctx context.Context, q querier, key int32) (*Holder, error) {
	var h Holder
	err := q.QueryRow(ctx, holderSQL, int64(uint32(lockNamespace)), key, int64(uint32(key))).
		Scan(&h.Group, &h.Owner, &h.Host, &h.Since, &h.PID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &h, nil
}

// Holder returns the current holder of group's lock, or nil when it is
// free. A row left by a crashed holder is not reported.
func (s *PGStore) Holder(ctx context.Context, group string) (*Holder, error) {
	h, err := holderOf(ctx, s.pool, lockKey(group))
	if err != nil {
		return nil, &StoreError{Op: "read lock holder", Err: err}
	}
	return h, nil
}

// Lock takes group's lock for owner on a dedicated session, or returns a
// [*LockedError] naming the holder. It does not wait.
func (s *PGStore) Lock(ctx context.Context, group, owner string) (Lease, error) {
	if group == "" || owner == "" {
		return nil, &ConfigError{Pkg: "lb", Field: "lock", Why: "group and owner must not be empty"}
	}
	key := lockKey(group)
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, &StoreError{Op: "lock", Err: err}
	}
	conn := pc.Hijack()
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, $2)", lockNamespace, key).Scan(&ok); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, &StoreError{Op: "lock", Err: err}
	}
	if !ok {
		h, err := holderOf(ctx, conn, key)
		_ = conn.Close(context.WithoutCancel(ctx))
		if err != nil {
			return nil, &StoreError{Op: "read lock holder", Err: err}
		}
		if h == nil {
			h = &Holder{Owner: "unknown (the lock is held but its holder has not written its row yet)"}
		}
		return nil, &LockedError{Group: group, Holder: *h}
	}
	l := &pgLease{conn: conn, key: key, holder: Holder{Group: group, Owner: owner, Host: s.host}}
	err = conn.QueryRow(ctx, `
INSERT INTO holdfast_lb_lock (group_name, owner, host, since, backend_pid, lock_key)
VALUES ($1, $2, $3, now(), pg_backend_pid(), $4)
ON CONFLICT (group_name) DO UPDATE SET owner = EXCLUDED.owner, host = EXCLUDED.host,
	since = EXCLUDED.since, backend_pid = EXCLUDED.backend_pid, lock_key = EXCLUDED.lock_key
RETURNING since, backend_pid`, group, owner, s.host, key).Scan(&l.holder.Since, &l.holder.PID)
	if err != nil {
		_ = conn.Close(context.WithoutCancel(ctx)) // ends the session, and the lock with it
		return nil, &StoreError{Op: "record lock holder", Err: err}
	}
	return l, nil
}

// pgLease holds an advisory lock on its own session.
type pgLease struct {
	mu       sync.Mutex
	conn     *pgx.Conn
	key      int32
	holder   Holder
	released bool
}

func (l *pgLease) Holder() Holder { return l.holder }

func (l *pgLease) Check(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return &LockLostError{Group: l.holder.Group, Err: errors.New("lease released")}
	}
	var held bool
	err := l.conn.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid()
	AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 2)`,
		int64(uint32(lockNamespace)), int64(uint32(l.key))).Scan(&held)
	if err != nil {
		return &LockLostError{Group: l.holder.Group, Err: err}
	}
	if !held {
		return &LockLostError{Group: l.holder.Group}
	}
	return nil
}

func (l *pgLease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil
	}
	l.released = true
	if l.conn.IsClosed() {
		return nil // the session ended, and the lock with it
	}
	_, err1 := l.conn.Exec(ctx, "DELETE FROM holdfast_lb_lock WHERE group_name = $1 AND backend_pid = pg_backend_pid()", l.holder.Group)
	_, err2 := l.conn.Exec(ctx, "SELECT pg_advisory_unlock($1, $2)", lockNamespace, l.key)
	dead := l.conn.IsClosed()
	err3 := l.conn.Close(context.WithoutCancel(ctx)) // ends the session: the lock goes in any case
	if dead {
		return nil
	}
	if err := errors.Join(err1, err2, err3); err != nil {
		return &StoreError{Op: "release lock", Err: err}
	}
	return nil
}

// Record inserts e (assigning e.ID) or, when e.ID is set, updates it.
func (s *PGStore) Record(ctx context.Context, e *Entry) error {
	members, err := json.Marshal(nonNil(e.Members))
	if err != nil {
		return &StoreError{Op: "audit", Err: err}
	}
	nodes := nonNil(e.Nodes)
	var finished *time.Time
	if e.Result != ResultRunning {
		t := e.Started.Add(e.Duration)
		finished = &t
	}
	ms := float64(e.Duration) / float64(time.Millisecond)
	if e.ID == 0 {
		err = s.pool.QueryRow(ctx, `
INSERT INTO holdfast_lb_audit (started_at, finished_at, duration_ms, operator, host, action, group_name, nodes, members, result, error)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id`,
			e.Started, finished, ms, e.Operator, e.Host, string(e.Action), e.Group, nodes, string(members), string(e.Result), e.Error).Scan(&e.ID)
	} else {
		var tag pgconn.CommandTag
		tag, err = s.pool.Exec(ctx, `
UPDATE holdfast_lb_audit SET finished_at = $2, duration_ms = $3, nodes = $4, members = $5, result = $6, error = $7
WHERE id = $1`, e.ID, finished, ms, nodes, string(members), string(e.Result), e.Error)
		if err == nil && tag.RowsAffected() != 1 {
			err = errors.New("no audit row with id " + strconv.FormatInt(e.ID, 10))
		}
	}
	if err != nil {
		return &StoreError{Op: "audit", Err: err}
	}
	return nil
}

// Entries returns the audit trail of group ("" for every group), newest
// first, at most limit entries (limit <= 0 means 100).
func (s *PGStore) Entries(ctx context.Context, group string, limit int) ([]Entry, error) {
	if limit <= 0 {
		limit = 100
	}
	return s.entries(ctx, auditColumns+` WHERE $1 = '' OR group_name = $1 ORDER BY id DESC LIMIT $2`, group, limit)
}

// Entry returns the audit entry id, or a nil entry and a nil error when
// there is none.
func (s *PGStore) Entry(ctx context.Context, id int64) (*Entry, error) {
	es, err := s.entries(ctx, auditColumns+` WHERE id = $1`, id)
	if err != nil || len(es) == 0 {
		return nil, err
	}
	return &es[0], nil
}

const auditColumns = `
SELECT id, started_at, duration_ms, operator, host, action, group_name, nodes, members, result, error
FROM holdfast_lb_audit`

func (s *PGStore) entries(ctx context.Context, sql string, args ...any) ([]Entry, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, &StoreError{Op: "read audit", Err: err}
	}
	var out []Entry
	for rows.Next() {
		var (
			e       Entry
			ms      float64
			action  string
			result  string
			members []byte
		)
		if err := rows.Scan(&e.ID, &e.Started, &ms, &e.Operator, &e.Host, &action, &e.Group, &e.Nodes, &members, &result, &e.Error); err != nil {
			rows.Close()
			return nil, &StoreError{Op: "read audit", Err: err}
		}
		e.Duration = time.Duration(ms * float64(time.Millisecond))
		e.Action, e.Result = Action(action), Result(result)
		if err := json.Unmarshal(members, &e.Members); err != nil {
			rows.Close()
			return nil, &StoreError{Op: "read audit", Err: err}
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, &StoreError{Op: "read audit", Err: err}
	}
	return out, nil
}

// Holders returns the holder of every locked group, by group, in one
// query. Rows left by crashed holders are not reported.
func (s *PGStore) Holders(ctx context.Context) (map[string]Holder, error) {
	rows, err := s.pool.Query(ctx, `
SELECT l.group_name, l.owner, l.host, l.since, l.backend_pid
FROM holdfast_lb_lock l
WHERE EXISTS (
	SELECT 1 FROM pg_locks p
	WHERE p.locktype = 'advisory' AND p.granted AND p.pid = l.backend_pid
	  AND p.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	  AND p.classid = $1::bigint::oid AND p.objid = (l.lock_key::bigint & 4294967295)::oid AND p.objsubid = 2)`,
		int64(uint32(lockNamespace)))
	if err != nil {
		return nil, &StoreError{Op: "read lock holders", Err: err}
	}
	out := map[string]Holder{}
	for rows.Next() {
		var h Holder
		if err := rows.Scan(&h.Group, &h.Owner, &h.Host, &h.Since, &h.PID); err != nil {
			rows.Close()
			return nil, &StoreError{Op: "read lock holders", Err: err}
		}
		out[h.Group] = h
	}
	if err := rows.Err(); err != nil {
		return nil, &StoreError{Op: "read lock holders", Err: err}
	}
	return out, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
