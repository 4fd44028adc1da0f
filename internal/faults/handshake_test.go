package faults_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/holdfast-db/holdfast/classify"
)

// handshakeCase is how a connect whose handshake fails is run: holdfast
// with the fault gone before the second attempt, holdfast with the fault
// in place throughout, or plain pgxpool (the control).
type handshakeCase struct {
	name      string
	plain     bool
	clears    bool // the fault is gone before the second dial
	wantDials int64
}

var handshakeCases = []handshakeCase{
	{name: "holdfast, cleared after the first attempt", clears: true, wantDials: 2},
	{name: "holdfast, throughout", wantDials: 3},
	{name: "control: plain pgxpool", plain: true, wantDials: 1},
}

// A connection reset (reset_peer) or cut (limit_data: 8 bytes of the
// startup message pass, then the proxy closes) during the startup
// handshake is retried: a connect whose fault clears before its second
// attempt succeeds with 2 dials and 1 retry; one whose fault stays fails
// transient after MaxAttempts dials. Control: plain pgxpool fails at the
// first.
func TestHandshakeResetAndCut(t *testing.T) {
	t.Parallel()
	dsn, addr := serverAddr(t)
	for _, fault := range []struct{ name, typ, attrs string }{
		{"reset", "reset_peer", `"timeout":0`},
		{"cut", "limit_data", `"bytes":8`},
	} {
		for _, tc := range handshakeCases {
			t.Run(fault.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				p := newProxy(t, addr)
				p.toxic(t, fault.typ, "upstream", fault.attrs)
				d := &dialCounter{}
				if tc.clears {
					d.before = func(n int64) {
						if n == 2 {
							p.clear()
						}
					}
				}
				cfg := configAt(t, dsn, p.addr, d, "")
				f, b := newHoldfast(t, testPolicy())
				var err error
				var took time.Duration
				if tc.plain {
					took, err = ping(plainPool(t, cfg), 20*time.Second)
				} else {
					took, err = ping(holdfastPool(t, f, cfg), 20*time.Second)
				}
				t.Logf("MEASURED %s %s: %d dials, %d retries, %v, %s", fault.name, tc.name, d.dials(), b.Retries(), took.Round(time.Millisecond), outcome(f, err))
				checkHandshake(t, tc, d.dials(), b.Retries(), err, f.Classify(err), "")
				within(t, "the connect", took, 2*time.Second)
			})
		}
	}
}

// checkHandshake checks a handshakeCase's outcome: its dials, its retries
// and its error, whose verdict must be transient (with reason, when not
// empty).
func checkHandshake(t *testing.T, tc handshakeCase, dials, retries int64, err error, v classify.Verdict, reason string) {
	t.Helper()
	if dials != tc.wantDials {
		t.Errorf("dials = %d, want %d", dials, tc.wantDials)
	}
	if want := tc.wantDials - 1; !tc.plain && retries != want {
		t.Errorf("retries = %d, want %d", retries, want)
	}
	if tc.clears {
		if err != nil {
			t.Errorf("the fault cleared before the second attempt, and Ping = %v", err)
		}
		return
	}
	if err == nil {
		t.Fatal("Ping succeeded through the fault")
	}
	if !v.Retryable() || (reason != "" && v.Reason != reason) {
		t.Errorf("Classify = %v, want transient %s", v, reason)
	}
}

// A server that is starting up (or recovering) answers a connection's
// startup message with FATAL 57P03: holdfast retries the connect, which
// succeeds once the server accepts connections (2 dials) or fails
// transient after MaxAttempts. Control: plain pgxpool fails at the first.
func TestServerStartingUp(t *testing.T) {
	t.Parallel()
	dsn, addr := serverAddr(t)
	for _, tc := range handshakeCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			refuse := int64(1 << 30) // throughout
			if tc.clears {
				refuse = 1
			}
			fe := refusing(t, addr, refuse, "57P03")
			d := &dialCounter{}
			cfg := configAt(t, dsn, fe, d, "")
			f, b := newHoldfast(t, testPolicy())
			var err error
			var took time.Duration
			if tc.plain {
				took, err = ping(plainPool(t, cfg), 20*time.Second)
			} else {
				took, err = ping(holdfastPool(t, f, cfg), 20*time.Second)
			}
			t.Logf("MEASURED 57P03 %s: %d dials, %d retries, %v, %s", tc.name, d.dials(), b.Retries(), took.Round(time.Millisecond), outcome(f, err))
			checkHandshake(t, tc, d.dials(), b.Retries(), err, f.Classify(err), "sqlstate-57P03")
			within(t, "the connect", took, time.Second)
		})
	}
}

// refusals are the messages of the FATAL errors refusing answers with.
var refusals = map[string]string{
	"57P03": "the database system is starting up",
	"28000": "PAM authentication failed for user", // RDS IAM, a stale token
}

// refusing starts a front end for upstream that answers the startup
// message of its first refuse connections with a FATAL error of code (a
// key of refusals; 57P03: as a postmaster does while it starts or
// recovers), and relays the later ones to upstream. It returns its
// address; the test's cleanup stops it and joins its goroutines.
func refusing(t *testing.T, upstream string, refuse int64, code string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := (&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code,
		Message: refusals[code]}).Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		conns    []net.Conn
		accepted atomic.Int64
	)
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	serve := func(c net.Conn) {
		defer c.Close()
		var head [4]byte
		if _, err := io.ReadFull(c, head[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(head[:])
		if n < 8 || n > 10000 {
			return
		}
		startup := make([]byte, n)
		copy(startup, head[:])
		if _, err := io.ReadFull(c, startup[4:]); err != nil {
			return
		}
		if accepted.Add(1) <= refuse {
			_, _ = c.Write(msg)
			return
		}
		up, err := net.Dial("tcp", upstream)
		if err != nil {
			return
		}
		track(up)
		defer up.Close()
		if _, err := up.Write(startup); err != nil {
			return
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = io.Copy(c, up)
			c.Close()
		}()
		_, _ = io.Copy(up, c)
		up.Close()
		<-done
	}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			track(c)
			wg.Go(func() { serve(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// A role at its CONNECTION LIMIT gets FATAL 53300 ("too many connections
// for role"): holdfast retries the connect, which succeeds once the role's
// other session has ended (2 dials) or fails transient after MaxAttempts.
// Control: plain pgxpool fails at the first.
func TestConnectionLimit(t *testing.T) {
	t.Parallel()
	dsn, addr := serverAddr(t)
	admin := func(t *testing.T) *pgx.Conn {
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
	for _, tc := range handshakeCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			su := admin(t)
			role := tableName("limit")
			if _, err := su.Exec(ctx, "CREATE ROLE "+role+" LOGIN CONNECTION LIMIT 1"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if _, err := su.Exec(context.Background(), "DROP ROLE "+role); err != nil {
					t.Errorf("drop role: %v", err)
				}
			})
			d := &dialCounter{}
			cfg := configAt(t, dsn, addr, d, "")
			cfg.ConnConfig.User = role

			// The role's one allowed session.
			held, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
			if err != nil {
				t.Fatal(err)
			}
			d.n.Store(0)
			defer held.Close(ctx)
			if tc.clears {
				d.before = func(n int64) {
					if n != 2 {
						return
					}
					held.Close(ctx)
					// Bounded: the server ends the session within milliseconds.
					for i := 0; i < 500; i++ {
						var left int
						if err := su.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE usename = $1", role).Scan(&left); err != nil || left == 0 {
							return
						}
						time.Sleep(10 * time.Millisecond)
					}
				}
			}
			f, b := newHoldfast(t, testPolicy())
			if tc.plain {
				_, err = ping(plainPool(t, cfg), 20*time.Second)
			} else {
				_, err = ping(holdfastPool(t, f, cfg), 20*time.Second)
			}
			t.Logf("MEASURED 53300 %s: %d dials, %d retries, %s", tc.name, d.dials(), b.Retries(), outcome(f, err))
			checkHandshake(t, tc, d.dials(), b.Retries(), err, f.Classify(err), "sqlstate-53300")
		})
	}
}
