// Package topology reads what an Aurora or RDS cluster says about itself and
// names its endpoints: the host-name shapes of RDS endpoints, the instance
// endpoints derived from a cluster endpoint, the cluster's instances from
// aurora_replica_status() (Aurora) or rds_tools.show_topology() (RDS
// Multi-AZ DB clusters), and the helpers a monitor connection outside the
// pool needs. Package bluegreen (switchover routing) and package failover
// (writer failover routing) share it.
//
// What a server says is not trusted on its own: a host name a row gives is
// used only inside the cluster's [Scope] (the configured hosts and their
// account and Region domain, or an instance template's), a function is
// read only when a superuser or rdsadmin owns it, or the extension of its
// schema's name (rds_tools) has it ([UntrustedOwnerSQL],
// checked in the statement that reads it), every function, type and
// operator of the monitors' statements is schema-qualified, and a read
// uses at most [MaxRows] rows.
package topology
