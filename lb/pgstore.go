package lb

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Advisory lock namespaces (the first key of the two-int4 form): group
// locks, member locks, node locks, and schema changes.
const (
	lockNamespace   int32 = 0x68666c62 // "hflb"
	memberNamespace int32 = 0x68666c6d // "hflm"
	nodeNamespace   int32 = 0x68666c6e // "hfln"
	schemaNamespace int32 = 0x68666c73 // "hfls"
)

// The schema, brought up to date by [NewPGStore] in order, each step
// idempotent. Every change after the first is additive (a new table, a
// nullable column), so that rows written before stay readable and an
// older holdfast-lb keeps working against a newer schema.
var migrations = []string{
	// 1: locks and the audit trail.
	schemaSQL,
	// 2 (issue 34): who ran a request besides the asserted operator, and
	// notes such as an unverified transport; NULL in the rows written
	// before, which read as a zero Origin and no notes.
	`ALTER TABLE holdfast_lb_audit ADD COLUMN IF NOT EXISTS origin jsonb;
ALTER TABLE holdfast_lb_audit ADD COLUMN IF NOT EXISTS notes text[];`,
	// 3 (issue 34): the members a group lock covers, one row per advisory
	// lock, so that a refusal names the holder of a shared member.
	`CREATE TABLE IF NOT EXISTS holdfast_lb_lock_member (
	backend_pid integer NOT NULL,
	lock_ns     integer NOT NULL,
	lock_key    integer NOT NULL,
	shared      boolean NOT NULL,
	group_name  text NOT NULL,
	owner       text NOT NULL,
	host        text NOT NULL,
	since       timestamptz NOT NULL,
	member      text NOT NULL,
	PRIMARY KEY (backend_pid, lock_ns, lock_key)
);
CREATE INDEX IF NOT EXISTS holdfast_lb_lock_member_key ON holdfast_lb_lock_member (lock_ns, lock_key);`,
}

// The first schema, as holdfast-lb created it before migrations.
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
// The group's members ([LockMember]) are locked on the same session, in
// the order of their keys, after the group and all or nothing: a member
// (pool member, server port) exclusively with
// pg_try_advisory_lock(0x68666c6d, fnv32a(device, member)) and its node
// shared with pg_try_advisory_lock_shared(0x68666c6e, fnv32a(device,
// node)); a whole node exclusively under the second key. One row per lock
// in holdfast_lb_lock_member lets a refusal name the holder. If any lock
// is refused, the session is closed, which frees every lock it took. Keys
// are 32-bit hashes: two members sharing one exclude each other, which is
// safe.
//
// # Audit
//
// Every [Entry] is a row of holdfast_lb_audit; members are stored as
// jsonb, the Origin as jsonb, the notes as text[].
//
// # Schema
//
// NewPGStore creates the tables and brings them up to date: every change
// is additive (a table, a nullable column), so rows written by an older
// holdfast-lb stay readable and an older holdfast-lb keeps working with
// the newer schema (it takes no member locks, though: upgrade every
// holdfast-lb sharing a database).
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
		for _, m := range migrations {
			if _, err := tx.Exec(ctx, m); err != nil {
				return err
			}
		}
		return nil
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

// Lock takes group's lock for owner on a dedicated session, and the
// locks of members (see [Locker]), all or nothing, or returns a
// [*LockedError] naming the holder. It does not wait.
func (s *PGStore) Lock(ctx context.Context, group, owner string, members ...LockMember) (Lease, error) {
	if group == "" || owner == "" {
		return nil, &ConfigError{Pkg: "lb", Field: "lock", Why: "group and owner must not be empty"}
	}
	for _, m := range members {
		if m.Device == "" {
			return nil, &ConfigError{Pkg: "lb", Field: "lock", Why: "member " + strconv.Quote(m.Name) + " names no device"}
		}
	}
	key := lockKey(group)
	keys := memberKeys(members)
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, &StoreError{Op: "lock", Err: err}
	}
	conn := pc.Hijack()
	closeConn := func() { _ = conn.Close(context.WithoutCancel(ctx)) } // ends the session: every lock it took goes
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, $2)", lockNamespace, key).Scan(&ok); err != nil {
		closeConn()
		return nil, &StoreError{Op: "lock", Err: err}
	}
	if !ok {
		h, err := holderOf(ctx, conn, key)
		closeConn()
		if err != nil {
			return nil, &StoreError{Op: "read lock holder", Err: err}
		}
		if h == nil {
			h = &Holder{Owner: unknownHolder}
		}
		return nil, &LockedError{Group: group, Holder: *h}
	}
	if i, err := tryKeys(ctx, conn, keys); err != nil || i >= 0 {
		if err != nil {
			closeConn()
			return nil, &StoreError{Op: "lock members", Err: err}
		}
		h, err := memberHolderOf(ctx, conn, keys[i])
		closeConn()
		if err != nil {
			return nil, &StoreError{Op: "read lock holder", Err: err}
		}
		if h == nil {
			h = &Holder{Owner: unknownHolder}
		}
		return nil, &LockedError{Group: group, Holder: *h, Member: keys[i].name}
	}
	l := &pgLease{conn: conn, key: key, holder: Holder{Group: group, Owner: owner, Host: s.host}, keys: map[advisoryKey]bool{}}
	err = conn.QueryRow(ctx, `
INSERT INTO holdfast_lb_lock (group_name, owner, host, since, backend_pid, lock_key)
VALUES ($1, $2, $3, now(), pg_backend_pid(), $4)
ON CONFLICT (group_name) DO UPDATE SET owner = EXCLUDED.owner, host = EXCLUDED.host,
	since = EXCLUDED.since, backend_pid = EXCLUDED.backend_pid, lock_key = EXCLUDED.lock_key
RETURNING since, backend_pid`, group, owner, s.host, key).Scan(&l.holder.Since, &l.holder.PID)
	if err == nil {
		err = recordKeys(ctx, conn, l.holder, keys)
	}
	if err != nil {
		closeConn()
		return nil, &StoreError{Op: "record lock holder", Err: err}
	}
	for _, k := range keys {
		l.keys[k.advisoryKey] = k.shared
	}
	return l, nil
}

const unknownHolder = "unknown (the lock is held but its holder has not written its row yet)"

// advisoryKey is one advisory lock of the two-int4 form.
type advisoryKey struct{ ns, key int32 }

// memberKey is an advisory lock a group lock takes for its members.
type memberKey struct {
	advisoryKey
	shared bool   // a node under a pool member: shared
	name   string // the member it was taken for, as the caller names it
}

// memberKeys returns the advisory locks for members, sorted by key, each
// once (exclusive when any member needs it exclusively).
func memberKeys(members []LockMember) []memberKey {
	idx := map[advisoryKey]int{}
	var out []memberKey
	add := func(k advisoryKey, shared bool, name string) {
		if i, ok := idx[k]; ok {
			if !shared && out[i].shared {
				out[i].shared, out[i].name = false, name
			}
			return
		}
		idx[k] = len(out)
		out = append(out, memberKey{advisoryKey: k, shared: shared, name: name})
	}
	for _, m := range members {
		name := cmp.Or(m.Name, m.Device+" "+m.Member.String())
		node := advisoryKey{nodeNamespace, hashKey(m.Device, "node", m.Member.Node)}
		if m.Member.Pool == "" && m.Member.Port == 0 {
			add(node, false, name)
			continue
		}
		add(node, true, name)
		add(advisoryKey{memberNamespace, hashKey(m.Device, "member", m.Member.String())}, false, name)
	}
	slices.SortFunc(out, func(a, b memberKey) int {
		return cmp.Or(cmp.Compare(a.ns, b.ns), cmp.Compare(a.key, b.key))
	})
	return out
}

// hashKey is fnv32a of the parts, NUL-separated.
func hashKey(parts ...string) int32 {
	h := fnv.New32a()
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(p))
	}
	return int32(h.Sum32())
}

// tryKeys tries every key in order in one round trip and returns the
// index of the first one refused, or -1 when all were taken.
func tryKeys(ctx context.Context, conn *pgx.Conn, keys []memberKey) (int, error) {
	if len(keys) == 0 {
		return -1, nil
	}
	b := &pgx.Batch{}
	for _, k := range keys {
		fn := "pg_try_advisory_lock"
		if k.shared {
			fn = "pg_try_advisory_lock_shared"
		}
		b.Queue("SELECT "+fn+"($1, $2)", k.ns, k.key)
	}
	br := conn.SendBatch(ctx, b)
	refused := -1
	for i := range keys {
		var ok bool
		if err := br.QueryRow().Scan(&ok); err != nil {
			_ = br.Close()
			return 0, err
		}
		if !ok && refused < 0 {
			refused = i
		}
	}
	return refused, br.Close()
}

// recordKeys writes one holdfast_lb_lock_member row per key, replacing any
// a dead session with the same backend pid left.
func recordKeys(ctx context.Context, conn *pgx.Conn, h Holder, keys []memberKey) error {
	if _, err := conn.Exec(ctx, "DELETE FROM holdfast_lb_lock_member WHERE backend_pid = pg_backend_pid()"); err != nil || len(keys) == 0 {
		return err
	}
	ns, ks, shared, names := make([]int32, len(keys)), make([]int32, len(keys)), make([]bool, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		ns[i], ks[i], shared[i], names[i] = k.ns, k.key, k.shared, k.name
	}
	_, err := conn.Exec(ctx, `
INSERT INTO holdfast_lb_lock_member (backend_pid, lock_ns, lock_key, shared, group_name, owner, host, since, member)
SELECT pg_backend_pid(), u.ns, u.k, u.s, $5, $6, $7, $8, u.m
FROM unnest($1::int4[], $2::int4[], $3::bool[], $4::text[]) AS u(ns, k, s, m)`,
		ns, ks, shared, names, h.Group, h.Owner, h.Host, h.Since)
	return err
}

// memberHolderOf returns a live holder of k, or nil.
func memberHolderOf(ctx context.Context, q querier, k memberKey) (*Holder, error) {
	var h Holder
	err := q.QueryRow(ctx, `
SELECT m.group_name, m.owner, m.host, m.since, m.backend_pid
FROM holdfast_lb_lock_member m
WHERE m.lock_ns = $1 AND m.lock_key = $2 AND EXISTS (
	SELECT 1 FROM pg_locks p
	WHERE p.locktype = 'advisory' AND p.granted AND p.pid = m.backend_pid
	  AND p.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	  AND p.classid = $3::bigint::oid AND p.objid = $4::bigint::oid AND p.objsubid = 2)
ORDER BY m.since
LIMIT 1`, k.ns, k.key, int64(uint32(k.ns)), int64(uint32(k.key))).Scan(&h.Group, &h.Owner, &h.Host, &h.Since, &h.PID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &h, nil
}

// pgLease holds an advisory lock on its own session.
type pgLease struct {
	mu       sync.Mutex
	conn     *pgx.Conn
	key      int32
	holder   Holder
	keys     map[advisoryKey]bool // the member locks held: shared or not
	released bool
}

func (l *pgLease) Holder() Holder { return l.holder }

// covers reports whether the lease holds the locks of members (see
// [Controller.Do]: a lease taken without them does not let a request
// drive them).
func (l *pgLease) covers(members []LockMember) bool {
	for _, k := range memberKeys(members) {
		shared, ok := l.keys[k.advisoryKey]
		if !ok || (shared && !k.shared) {
			return false
		}
	}
	return true
}

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
	if err1 == nil {
		_, err1 = l.conn.Exec(ctx, "DELETE FROM holdfast_lb_lock_member WHERE backend_pid = pg_backend_pid()")
	}
	_, err2 := l.conn.Exec(ctx, "SELECT pg_advisory_unlock_all()")
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
	origin, err := json.Marshal(e.Origin)
	if err != nil {
		return &StoreError{Op: "audit", Err: err}
	}
	notes := nonNil(e.Notes)
	nodes := nonNil(e.Nodes)
	var finished *time.Time
	if e.Result != ResultRunning {
		t := e.Started.Add(e.Duration)
		finished = &t
	}
	ms := float64(e.Duration) / float64(time.Millisecond)
	if e.ID == 0 {
		err = s.pool.QueryRow(ctx, `
INSERT INTO holdfast_lb_audit (started_at, finished_at, duration_ms, operator, host, action, group_name, nodes, members, result, error, origin, notes)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING id`,
			e.Started, finished, ms, e.Operator, e.Host, string(e.Action), e.Group, nodes, string(members), string(e.Result), e.Error, string(origin), notes).Scan(&e.ID)
	} else {
		var tag pgconn.CommandTag
		tag, err = s.pool.Exec(ctx, `
UPDATE holdfast_lb_audit SET finished_at = $2, duration_ms = $3, nodes = $4, members = $5, result = $6, error = $7, notes = $8
WHERE id = $1`, e.ID, finished, ms, nodes, string(members), string(e.Result), e.Error, notes)
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
SELECT id, started_at, duration_ms, operator, host, action, group_name, nodes, members, result, error, origin, notes
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
			origin  []byte // NULL in rows written before the column
		)
		if err := rows.Scan(&e.ID, &e.Started, &ms, &e.Operator, &e.Host, &action, &e.Group, &e.Nodes, &members, &result, &e.Error, &origin, &e.Notes); err != nil {
			rows.Close()
			return nil, &StoreError{Op: "read audit", Err: err}
		}
		e.Duration = time.Duration(ms * float64(time.Millisecond))
		e.Action, e.Result = Action(action), Result(result)
		if err := json.Unmarshal(members, &e.Members); err != nil {
			rows.Close()
			return nil, &StoreError{Op: "read audit", Err: err}
		}
		if origin != nil {
			if err := json.Unmarshal(origin, &e.Origin); err != nil {
				rows.Close()
				return nil, &StoreError{Op: "read audit", Err: err}
			}
		}
		if len(e.Notes) == 0 {
			e.Notes = nil
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
