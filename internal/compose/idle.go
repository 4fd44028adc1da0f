package compose

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// CloseIdle closes pool's idle connections whose server address pick
// chooses (called once per idle connection, in one pass), and returns how
// many it closed: what a layer that left a server behind does with the
// connections to it that nobody holds (those in use are destroyed when
// next acquired: Composition.Gone). A closed connection is destroyed at
// its Release, and pgxpool's health check then restores MinConns. It
// waits at most a second for the idle connections, and 100 ms for each
// close (a Terminate, then the socket closes).
func CloseIdle(pool *pgxpool.Pool, pick func(addr string) bool) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	closed := 0
	for _, c := range pool.AcquireAllIdle(ctx) {
		if pick(c.Conn().PgConn().Conn().RemoteAddr().String()) {
			closed++
			cctx, ccancel := context.WithTimeout(ctx, 100*time.Millisecond)
			_ = c.Conn().Close(cctx)
			ccancel()
		}
		c.Release()
	}
	return closed
}
