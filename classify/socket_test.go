//go:build unix

package classify_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-db/holdfast/classify"
)

// A Unix socket that does not exist (issue 29, item 8) — a Cloud SQL Auth
// Proxy sidecar in unix-socket mode that has not started yet, a local
// server restarting — is Transient "socket-missing", like a refused TCP
// port, as net.Dialer and pgconn really return it; ENOENT anywhere else
// stays unknown.
func TestMissingUnixSocket(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "cloudsql", "proj:region:inst")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var d net.Dialer
	_, dialErr := d.DialContext(ctx, "unix", filepath.Join(dir, ".s.PGSQL.5432"))
	cfg, err := pgconn.ParseConfig("host=" + dir + " user=app dbname=app")
	if err != nil {
		t.Fatal(err)
	}
	_, pgxErr := pgconn.ConnectConfig(ctx, cfg)
	_, fileErr := os.Open(filepath.Join(dir, "token"))
	tcpENOENT := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ENOENT)}
	readENOENT := &net.OpError{Op: "read", Net: "unix", Err: os.NewSyscallError("read", syscall.ENOENT)}

	for _, tt := range []struct {
		name string
		err  error
		want classify.Verdict
	}{
		{"net.Dialer", dialErr, transient(classify.ReasonSocketMissing)},
		{"pgconn", pgxErr, transient(classify.ReasonSocketMissing)},
		{"a file, not a socket", fileErr, fatal(classify.ReasonUnknown)},
		{"ENOENT on a TCP dial", tcpENOENT, fatal(classify.ReasonUnknown)},
		{"ENOENT on a read", readENOENT, fatal(classify.ReasonUnknown)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil {
				t.Fatal("no error")
			}
			if got := classify.Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
	if !classify.ConnectionLost(dialErr) {
		t.Errorf("ConnectionLost(%v) = false: a dial that reached no server", dialErr)
	}
}
