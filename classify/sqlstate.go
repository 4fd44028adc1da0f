package classify

// transientSQLStates lists the SQLSTATE codes a new connection attempt may
// outlive. Every other code is Fatal.
var transientSQLStates = map[string]bool{
	"08000": true, // connection_exception
	"08001": true, // sqlclient_unable_to_establish_sqlconnection
	"08003": true, // connection_does_not_exist
	"08004": true, // sqlserver_rejected_establishment_of_sqlconnection
	"08006": true, // connection_failure
	"53000": true, // insufficient_resources
	"53200": true, // out_of_memory
	"53300": true, // too_many_connections
	"57P01": true, // admin_shutdown
	"57P02": true, // crash_shutdown
	"57P03": true, // cannot_connect_now
	"57P05": true, // idle_session_timeout
}

// SQLState classifies a PostgreSQL SQLSTATE code as the built-in rules do
// for a *pgconn.PgError carrying it. The Reason is "sqlstate-" + code, e.g.
// "sqlstate-57P01"; a code that is not five characters of 0-9 and A-Z gives
// {Fatal, "sqlstate-invalid"} so that arbitrary text never reaches a Reason.
//
// Transient codes: 08000, 08001, 08003, 08004, 08006, 53000, 53200, 53300,
// 57P01, 57P02, 57P03, 57P05. Every other code is Fatal; see the package
// documentation for the full table.
func SQLState(code string) Verdict {
	if !validSQLState(code) {
		return Verdict{Fatal, ReasonPrefixSQLState + "invalid"}
	}
	if transientSQLStates[code] {
		return Verdict{Transient, ReasonPrefixSQLState + code}
	}
	return Verdict{Fatal, ReasonPrefixSQLState + code}
}

func validSQLState(code string) bool {
	if len(code) != 5 {
		return false
	}
	for i := 0; i < len(code); i++ {
		c := code[i]
		if (c < '0' || c > '9') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}
