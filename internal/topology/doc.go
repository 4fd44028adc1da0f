// Package topology reads what an Aurora or RDS cluster says about itself and
// names its endpoints: the host-name shapes of RDS endpoints, the instance
// endpoints derived from a cluster endpoint, the cluster's instances from
// aurora_replica_status() (Aurora) or rds_tools.show_topology() (RDS
// Multi-AZ DB clusters), and the helpers a monitor connection outside the
// pool needs. Package bluegreen (switchover routing) and package failover
// (writer failover routing) share it.
package topology
