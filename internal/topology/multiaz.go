package topology

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// MultiAZFunction lists the instances of an RDS Multi-AZ DB cluster.
const MultiAZFunction = "rds_tools.show_topology"

// ReadMultiAZ reads an RDS Multi-AZ DB cluster's topology. (Not yet
// implemented.)
func ReadMultiAZ(ctx context.Context, conn *pgx.Conn) ([]Row, []error, error) {
	return nil, nil, errors.New("topology: Multi-AZ DB clusters are not read yet")
}

func selfMultiAZ(ctx context.Context, conn *pgx.Conn) (string, bool, error) {
	return "", false, errors.New("topology: Multi-AZ DB clusters are not read yet")
}
