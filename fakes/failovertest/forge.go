package failovertest

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"fmt"

	"github.com/holdfast-db/holdfast/fakes/internal/pgnode"
	"github.com/jackc/pgx/v5"
)

// ForgeRow adds a row to the topology the servers publish, for a server
// that does not exist: server id id, and, with Engine MultiAZ, the
// instance endpoint endpoint on port (a dbi resource id derived from
// endpoint). It is what a forged or compromised topology says, to test
// that a client does not follow it: a row naming a host outside the
// cluster's domain, or an id that is no instance identifier. The servers'
// own rows stay, and none of them is the writer's; the simulator's next
// topology change (a failover, AddReader, RemoveReader, SetLag) drops the
// forged rows. It returns once every standby has replayed the row.
func (c *Cluster) ForgeRow(ctx context.Context, id, endpoint string, port int) error {
	c.mu.Lock()
	w, standbys := c.writer, append([]*node(nil), c.standbys...)
	c.mu.Unlock()
	conn, err := pgx.Connect(ctx, w.DSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	sum := sha256.Sum256([]byte(endpoint + "/" + id))
	rid := "db-" + base32.StdEncoding.EncodeToString(sum[:])[:26]
	if _, err := conn.Exec(ctx, `INSERT INTO holdfast_failover.replica_status
		(server_id, session_id, replica_lag_in_msec, dbi_resource_id, endpoint, port) VALUES ($1, 'forged', 0, $2, $3, $4)`,
		id, rid, endpoint, port); err != nil {
		return fmt.Errorf("forging a topology row: %w", err)
	}
	var lsn string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		return err
	}
	for _, s := range standbys {
		if err := pgnode.WaitReplayed(ctx, s.Node, lsn); err != nil {
			return fmt.Errorf("%s replaying the forged row: %w", s.ID, err)
		}
	}
	return nil
}
