// Package bluegreentest simulates an RDS or Aurora PostgreSQL blue/green
// deployment on one machine, from real parts, for holdfast's tests and
// yours: two real PostgreSQL servers, the metadata functions RDS publishes,
// and a fake DNS.
//
// # The environment
//
// [Start] starts a blue and a green server from the PostgreSQL binaries
// installed on the machine, on the same port at two loopback addresses
// (127.0.0.11 and 127.0.0.21 by default), as two RDS instances are. With
// Config.TLS both serve TLS with a certificate for RDS-shaped host names,
// so that clients can use sslmode=verify-full. [Env.Resolver] is the fake
// DNS: give its Lookup to pgx as ConnConfig.LookupFunc, and [Env.Dial] as
// ConnConfig.DialFunc ([Deployment.PoolConfig] sets both).
//
// Where those addresses cannot be bound (macOS, unless the loopback
// interface has them as aliases: [AliasHelp]), Start falls back to the
// single-address mode ([Env.SingleIP]): both servers listen on 127.0.0.1 at
// two ports, and Env.Dial still presents them to clients at the two
// addresses on one port, so holdfast sees the same topology.
// Config.SingleIP or HOLDFAST_SIM_SINGLE_IP=1 ([EnvSingleIP]) force that
// mode, to test it on Linux.
//
//	env, err := bluegreentest.Start(ctx, bluegreentest.Config{TLS: true})
//	if errors.Is(err, bluegreentest.ErrNotFound) {
//		t.Skip(err) // no PostgreSQL installed
//	}
//	defer env.Close()
//
// # Deployments
//
// [Env.NewDeployment] creates a deployment in its own database on both
// servers, so that tests sharing an Env can run in parallel. The database
// holds the real metadata function, with its real name and columns, fed
// from a control table:
//
//	| engine | function                                                 | columns                                   |
//	|--------|----------------------------------------------------------|-------------------------------------------|
//	| Aurora | pg_catalog.get_blue_green_fast_switchover_metadata(text) | version, endpoint, port, role, status     |
//	| RDS    | rds_tools.show_topology(text)                            | id, endpoint, port, role, status, version |
//
// (A superuser can create a function in pg_catalog on PostgreSQL 15
// without allow_system_table_mods; [Install] does that.) An Aurora
// deployment also has what Aurora publishes of the cluster, from control
// tables of their own on each server, so that a topology-aware client
// (holdfast's failover monitor, the AWS wrappers) can run on it:
//
//   - pg_catalog.aurora_replica_status() (server_id, session_id,
//     last_update_timestamp, replica_lag_in_msec, cpu): each side lists
//     its own instances, the writer with session_id MASTER_SESSION_ID;
//   - pg_catalog.aurora_db_instance_identifier(): the identifier of the
//     instance the server is, its side's writer: "orders-1" on blue and
//     "orders-1-green-abc123" on green; after [Deployment.Rename],
//     "orders-1" on green and "orders-1-old1" on old blue, as in the
//     topology rows. (The readers of DeploymentConfig.Readers are their
//     side's server, so they answer the writer's identifier too.)
//
// The deployment's RDS-shaped names ([Names]) are set in the resolver:
// blue names to the blue server, green names to the green one. Among them
// are the instance endpoints, "<server_id>.<account>.<region>.rds.amazonaws.com",
// the names a topology-aware client derives from the cluster endpoint and
// the server_id column: [Deployment.ResetDNS] points blue's at blue and
// green's at green, [Deployment.SwapDNS] the blue names at green and the
// -old1 names at old blue. Between Rename and SwapDNS green's topology
// names "orders-1" while that name still leads to old blue, as on RDS.
//
// DeploymentConfig.Readers adds reader instances to each side, each at an
// address of its own ([Server.ReaderAddr]) that [Env.Dial] connects to its
// side's server: routing by address sees distinct readers, though they
// share the server's data. DeploymentConfig.ClusterEndpointsOnly makes the
// metadata list only the cluster endpoints, so that the instances are known
// from the topology alone.
//
// A test then plays the switchover step by step, as RDS does it:
//
//	d, err := env.NewDeployment(ctx, bluegreentest.DeploymentConfig{Engine: bluegreentest.Aurora})
//	cfg, err := d.PoolConfig(d.Names.Cluster)            // verify-full, the fake DNS and dialer
//	d.SetStatus(ctx, bluegreentest.StatusAvailable)      // CREATED
//	d.SetStatus(ctx, bluegreentest.StatusInitiated)      // PREPARATION
//	d.SetStatus(ctx, bluegreentest.StatusInProgress)     // IN_PROGRESS
//	d.SetStatus(ctx, bluegreentest.StatusPostProcessing) // POST
//	d.Rename(ctx)                                        // green takes the blue names
//	d.SwapDNS()                                          // blue names → green server
//	d.RemoveGreenDNS()                                   // green names gone
//	d.SetStatus(ctx, bluegreentest.StatusCompleted)      // COMPLETED
//	d.DropSource(ctx)                                    // SOURCE rows gone
//
// Each step writes the metadata of both servers (d.Blue and d.Green write
// one of them, for servers that disagree), or changes DNS. The control
// table stays writable when a database is made read-only. Metadata.Fail
// makes the function raise an error; Metadata.Uninstall drops it.
//
// These steps change only the metadata and DNS. For a whole switchover
// with real effects, start the Env with [ReplicationSettings], replicate
// the application tables ([Deployment.Replicate]: logical replication from
// blue to green, green read-only until promoted), connect as a
// non-superuser ([Deployment.CreateRole]) and play a [Scenario] with
// [Deployment.Switchover]: blue refuses connections (53300), terminates
// its sessions (57P01) and turns read-only (25006), green catches up and is
// promoted, the names swap. [Resolver.Cached] adds a client-side DNS cache
// with a TTL. examples/switchover is the whole thing, with a workload.
//
// # What RDS checks at the door: IAM tokens and node certificates
//
// Two options of [Config] put a front end before each server, where RDS's
// own would be; [Env.Dial] connects to it:
//
//   - NodeCerts: each server presents a certificate for the names it
//     answers to, as each RDS instance does (the blue names of every
//     deployment on blue, the green names on green), instead of the
//     wildcards. A switchover renews them some time after the rename
//     ([Deployment.RenewCertificates], Timings.Certificates): until then
//     green's certificate lacks the blue names, and sslmode=verify-full by
//     a blue name fails against green.
//   - IAM: every user but the superuser must present an RDS IAM token, of
//     the form rdsiam mints (or [IAMToken]), signed for a name the server
//     answers to at that moment: the blue names on blue and the green names
//     on green, until [Deployment.Rename] (or [Deployment.RenameServers])
//     makes green answer to the blue names and old blue to the -old1 names.
//     Anything else gets FATAL 28000 "PAM authentication failed for user",
//     as from RDS. The signature is not checked.
//
// [ScenarioIAM] and [ScenarioNodeCerts] play a normal switchover on such an
// Env (the latter with the certificates renewed after COMPLETED).
//
// # Concurrency and cleanup
//
// Env, Deployment, Metadata and Resolver are safe for concurrent use. They
// own no goroutines, except an Env with NodeCerts or IAM: its front ends
// run an accept loop per server and two goroutines per connection. Close
// the Env to stop them and the servers, and remove their files;
// Deployment.Drop removes one deployment early.
package bluegreentest
