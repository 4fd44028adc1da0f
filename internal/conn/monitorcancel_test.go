package conn

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-db/holdfast/fakes/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestMonitorConnSendsNoCancelRequest: a connection prepared for a
// monitor (noCancelRequest, by monitorConnect) dials once: when its socket
// fails, pgx's cancel request (sent whenever it closes a connection after
// a failure) dials nothing. The control, plain pgx, dials twice.
func TestMonitorConnSendsNoCancelRequest(t *testing.T) {
	dsn := pgtest.DSN(t)
	for _, tt := range []struct {
		name    string
		monitor bool
		want    int64
	}{
		{"plain pgx", false, 2},
		{"monitor", true, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cc, err := pgx.ParseConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			var dials atomic.Int64
			var first atomic.Pointer[net.Conn]
			cc.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err == nil {
					first.CompareAndSwap(nil, &c)
				}
				return c, err
			}
			if tt.monitor {
				noCancelRequest(cc)
			}
			conn, err := pgx.ConnectConfig(ctx, cc)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			(*first.Load()).Close() // the socket fails under the connection
			if _, err := conn.Exec(ctx, "SELECT 1"); err == nil {
				t.Fatal("a statement succeeded on a closed socket")
			}
			select { // pgx's close after the failure, its cancel request first
			case <-conn.PgConn().CleanupDone():
			case <-ctx.Done():
				t.Fatal("the failed connection's cleanup did not end")
			}
			if n := dials.Load(); n != tt.want {
				t.Errorf("%d dials, want %d", n, tt.want)
			}
		})
	}
}
