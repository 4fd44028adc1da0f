package dashboards

import _ "embed" // the dashboard's JSON

// Grafana is the dashboard's JSON model (holdfast.json in this directory):
// import it in Grafana (Dashboards → New → Import) or provision the file.
// Its queries use the Prometheus names listed in the repository's
// telemetry page
// (https://github.com/holdfast-db/holdfast/blob/main/docs/telemetry.md#prometheus-names);
// a variable picks the data source and another the pools
// (db_client_connection_pool_name).
//
//go:embed holdfast.json
var Grafana []byte
