package bluegreentest

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

var validRole = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,40}$`)

// CreateRole creates role, a login role without superuser rights and
// without a password (trust authentication on loopback), on both servers
// if it does not exist, and lets it use the deployment's database as an
// application's user does: connect, read the blue/green metadata, and read
// and write every table and sequence of the public schema that exists now.
//
// Clients of a switchover ([Deployment.Switchover]) should connect as such
// a role: a superuser is not refused by the connection limit that holds new
// connections to blue during IN_PROGRESS.
func (d *Deployment) CreateRole(ctx context.Context, role string) error {
	if !validRole.MatchString(role) {
		return fmt.Errorf("fakes/bluegreentest: invalid role name %q: lowercase letters, digits and underscores", role)
	}
	create := `DO $$ BEGIN
	CREATE ROLE ` + role + ` LOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$`
	grant := `GRANT CONNECT ON DATABASE ` + d.Database + ` TO ` + role + `;
GRANT USAGE ON SCHEMA public, holdfast_fake TO ` + role + `;
GRANT SELECT ON ALL TABLES IN SCHEMA holdfast_fake TO ` + role + `;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ` + role + `;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO ` + role + `;
DO $$ BEGIN
	IF EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'rds_tools') THEN
		EXECUTE 'GRANT USAGE ON SCHEMA rds_tools TO ` + role + `';
	END IF;
END $$`
	for _, s := range []*Server{d.Env.Blue, d.Env.Green} {
		if err := s.Exec(ctx, "postgres", create); err != nil && !isCode(err, "23505", "42710") {
			return fmt.Errorf("fakes/bluegreentest: create role: %w", err)
		}
		// Grants write catalogs: READ WRITE whatever the database default.
		if err := execSession(ctx, s, d.Database, "SET default_transaction_read_only = off", grant); err != nil {
			return fmt.Errorf("fakes/bluegreentest: create role: %w", err)
		}
	}
	return nil
}

// RolePoolConfig is [Deployment.PoolConfig] with role as the user.
func (d *Deployment) RolePoolConfig(host, role string, extra ...string) (*pgxpool.Config, error) {
	cfg, err := d.PoolConfig(host, extra...)
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.User = role
	return cfg, nil
}

func isCode(err error, codes ...string) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	for _, c := range codes {
		if pe.Code == c {
			return true
		}
	}
	return false
}
