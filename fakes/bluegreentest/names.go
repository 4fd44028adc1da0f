package bluegreentest

// Defaults for RDS-shaped host names.
const (
	DefaultAccount     = "abcdefghijkl" // the 12-character id RDS puts in endpoint names
	DefaultRegion      = "us-east-1"
	DefaultGreenSuffix = "abc123" // the 6 characters after "-green-"
)

// Names are the RDS-shaped host names of a deployment, as RDS makes them:
//
//	Aurora, cluster "orders":
//	  Cluster        orders.cluster-ACCOUNT.REGION.rds.amazonaws.com
//	  Reader         orders.cluster-ro-ACCOUNT.REGION.rds.amazonaws.com
//	  Instance       orders-1.ACCOUNT.REGION.rds.amazonaws.com
//	  GreenCluster   orders-green-abc123.cluster-ACCOUNT.REGION.rds.amazonaws.com
//	  GreenInstance  orders-1-green-abc123.ACCOUNT.REGION.rds.amazonaws.com
//	  OldCluster     orders-old1.cluster-ACCOUNT.REGION.rds.amazonaws.com
//	  OldInstance    orders-1-old1.ACCOUNT.REGION.rds.amazonaws.com
//	RDS, instance "orders": only the instance names (orders.ACCOUNT…,
//	orders-green-abc123.ACCOUNT…, orders-old1.ACCOUNT…).
//
// Instance is the writer instance. An Aurora deployment with reader
// instances (DeploymentConfig.Readers) has their names too: orders-2,
// orders-3, … (ReaderInstances), orders-2-green-abc123, …
// (GreenReaderInstances), orders-2-old1, … (OldReaderInstances).
//
// The blue names are production's; after a switchover green carries them
// and the old blue instance the -old1 names.
type Names struct {
	Cluster, Reader, Instance                string // blue; Cluster and Reader empty for RDS
	GreenCluster, GreenReader, GreenInstance string
	OldCluster, OldReader, OldInstance       string

	ReaderInstances, GreenReaderInstances, OldReaderInstances []string
}

// NewNames returns the names of deployment name for engine, with account
// and region (defaults when empty) and the green suffix (default
// DefaultGreenSuffix).
func NewNames(engine Engine, name, account, region, greenSuffix string) Names {
	if account == "" {
		account = DefaultAccount
	}
	if region == "" {
		region = DefaultRegion
	}
	if greenSuffix == "" {
		greenSuffix = DefaultGreenSuffix
	}
	domain := "." + account + "." + region + ".rds.amazonaws.com"
	cluster := ".cluster-" + account + "." + region + ".rds.amazonaws.com"
	reader := ".cluster-ro-" + account + "." + region + ".rds.amazonaws.com"
	green := "-green-" + greenSuffix
	if engine == RDS {
		return Names{
			Instance:      name + domain,
			GreenInstance: name + green + domain,
			OldInstance:   name + "-old1" + domain,
		}
	}
	return Names{
		Cluster: name + cluster, Reader: name + reader, Instance: name + "-1" + domain,
		GreenCluster: name + green + cluster, GreenReader: name + green + reader, GreenInstance: name + "-1" + green + domain,
		OldCluster: name + "-old1" + cluster, OldReader: name + "-old1" + reader, OldInstance: name + "-1-old1" + domain,
	}
}

func nonEmpty(s ...string) []string {
	var out []string
	for _, x := range s {
		if x != "" {
			out = append(out, x)
		}
	}
	return out
}

// Blue returns the blue names (production's): the cluster, reader and
// writer instance endpoints, then the reader instances'.
func (n Names) Blue() []string {
	return append(nonEmpty(n.Cluster, n.Reader, n.Instance), n.ReaderInstances...)
}

// Green returns the green names, in the order of Blue.
func (n Names) Green() []string {
	return append(nonEmpty(n.GreenCluster, n.GreenReader, n.GreenInstance), n.GreenReaderInstances...)
}

// Old returns the names of the old blue instances after a switchover, in
// the order of Blue.
func (n Names) Old() []string {
	return append(nonEmpty(n.OldCluster, n.OldReader, n.OldInstance), n.OldReaderInstances...)
}

// Wildcards returns the certificate names that cover every name of every
// deployment in account and region (defaults when empty).
func Wildcards(account, region string) []string {
	if account == "" {
		account = DefaultAccount
	}
	if region == "" {
		region = DefaultRegion
	}
	tail := account + "." + region + ".rds.amazonaws.com"
	return []string{"*." + tail, "*.cluster-" + tail, "*.cluster-ro-" + tail, "*.cluster-custom-" + tail}
}
