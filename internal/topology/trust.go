package topology

import (
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// The functions a monitor reads are trusted only when a superuser (or
// rdsadmin, RDS's own) owns them. A role that owns the application's
// database but is not a superuser can create the schema rds_tools there,
// and in it a show_topology() that names hosts of its choosing; it cannot
// create a function owned by a superuser. Every statement of the monitors
// names its functions, types and operators with their schema, so that a
// search_path set on that database or role changes nothing they run.

// ErrUntrusted is matched by every *UntrustedError.
var ErrUntrusted = errors.New("topology: function not owned by a superuser")

// UntrustedError reports that a topology or metadata function is owned by
// a role that is neither a superuser nor rdsadmin: its rows are not used,
// and routing is off as when the function does not exist. It is not
// retryable until an administrator drops the function (or makes a
// superuser own it).
type UntrustedError struct {
	Function string // schema-qualified
	Owner    string // the owner's name (or oid)
}

func (e *UntrustedError) Error() string {
	return "topology: " + e.Function + "() is owned by " + strconv.Quote(e.Owner) +
		", which is neither a superuser nor rdsadmin: its rows are not trusted"
}

// Is matches ErrUntrusted.
func (e *UntrustedError) Is(target error) bool { return target == ErrUntrusted }

// UntrustedOwnerSQL returns an SQL expression (text) for fn
// ("schema.name"): the name of the owner of a function of that name that
// is neither a superuser nor rdsadmin (the first found, of any
// overload), or NULL when a superuser or rdsadmin owns every one (or
// there is none). A function that belongs to the extension named as its
// schema (rds_tools' functions, once CREATE EXTENSION rds_tools installed
// them) is trusted whoever owns it: on RDS the administrator who created
// the extension, not a superuser, may own its objects, and a database
// owner cannot make a function of theirs a member of an extension they
// could not create. fn is a constant of this module, never a row's.
func UntrustedOwnerSQL(fn string) string {
	schema, name, _ := strings.Cut(fn, ".")
	return `(SELECT COALESCE(r.rolname::pg_catalog.text, p.proowner::pg_catalog.text)
	FROM pg_catalog.pg_proc p
	JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
	LEFT JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) p.proowner
	WHERE n.nspname OPERATOR(pg_catalog.=) ` + quoteLiteral(schema) + ` AND p.proname OPERATOR(pg_catalog.=) ` + quoteLiteral(name) + `
	AND NOT COALESCE(r.rolsuper OR r.rolname OPERATOR(pg_catalog.=) 'rdsadmin', false)
	AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
		WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid OPERATOR(pg_catalog.=) p.oid
		AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
		AND d.deptype OPERATOR(pg_catalog.=) 'e' AND e.extname OPERATOR(pg_catalog.=) ` + quoteLiteral(schema) + `)
	LIMIT 1)`
}

// TrustColumn is the column a monitor's read adds to a function's rows:
// UntrustedOwnerSQL of the function, so that the check and the read are
// one statement (no round trip more, no window between them).
const TrustColumn = "holdfast_untrusted_owner"

// TrustedRead returns "SELECT t.*, <check> AS holdfast_untrusted_owner
// FROM fn(args) t": fn's rows, each with the name of an untrusted owner of
// fn (NULL when none).
func TrustedRead(fn, args string) string {
	return "SELECT t.*, " + UntrustedOwnerSQL(fn) + " AS " + TrustColumn + " FROM " + fn + "(" + args + ") t"
}

// CheckTrust returns an *UntrustedError for fn when owner (a TrustColumn
// value, nil for NULL) names an owner.
func CheckTrust(fn string, owner []byte) error {
	if owner == nil {
		return nil
	}
	return &UntrustedError{Function: fn, Owner: Truncate(string(owner), 64)}
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// trustColumn returns the index of TrustColumn among fds, or -1.
func trustColumn(fds []pgconn.FieldDescription) int { return columns(fds, TrustColumn)[0] }
