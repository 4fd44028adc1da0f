package topology

import (
	"reflect"
	"testing"
)

func TestInstanceDomain(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		hosts []string
		want  string
	}{
		{"writer cluster endpoint", []string{"mydb.cluster-abc.us-east-1.rds.amazonaws.com"}, "abc.us-east-1.rds.amazonaws.com"},
		{"reader cluster endpoint", []string{"mydb.cluster-ro-abc.us-east-1.rds.amazonaws.com"}, "abc.us-east-1.rds.amazonaws.com"},
		{"custom cluster endpoint", []string{"rep.cluster-custom-abc.us-east-1.rds.amazonaws.com"}, "abc.us-east-1.rds.amazonaws.com"},
		{"instance endpoint", []string{"mydb-1.abc.us-east-1.rds.amazonaws.com"}, "abc.us-east-1.rds.amazonaws.com"},
		{"green cluster endpoint", []string{"mydb-green-q1w2e3.cluster-abc.eu-west-1.rds.amazonaws.com"}, "abc.eu-west-1.rds.amazonaws.com"},
		{"China partition", []string{"mydb.cluster-abc.cn-north-1.rds.amazonaws.com.cn"}, "abc.cn-north-1.rds.amazonaws.com.cn"},
		{"the writer cluster endpoint is preferred", []string{"a-1.zzz.us-east-1.rds.amazonaws.com", "a.cluster-abc.us-east-1.rds.amazonaws.com"}, "abc.us-east-1.rds.amazonaws.com"},
		{"a name of your own", []string{"db.example.com"}, ""},
		{"RDS Proxy endpoint", []string{"orders-proxy.proxy-abc.us-east-1.rds.amazonaws.com"}, ""},
		{"RDS Proxy endpoint of your own", []string{"ro.endpoint.proxy-abc.us-east-1.rds.amazonaws.com"}, ""},
		{"global database endpoint", []string{"orders.global-abc.global.rds.amazonaws.com"}, ""},
		{"an address", []string{"10.0.0.1"}, ""},
		{"too short", []string{"a.cluster-rds.com"}, ""},
		{"nothing", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := InstanceDomain(tt.hosts); got != tt.want {
				t.Errorf("InstanceDomain(%q) = %q, want %q", tt.hosts, got, tt.want)
			}
		})
	}
}

func TestInstances(t *testing.T) {
	t.Parallel()
	const d = "abc.us-east-1.rds.amazonaws.com"
	rows := []Row{{ServerID: "db-2"}, {ServerID: "db-1", Writer: true}, {ServerID: "db-2"}, {ServerID: "db-3-old1"}}
	got := Instances(rows, d, 5432)
	want := []Instance{{Host: "db-1." + d, Port: 5432, Writer: true}, {Host: "db-2." + d, Port: 5432}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Instances = %+v, want %+v", got, want)
	}
	if got := Instances(rows, "", 5432); got != nil {
		t.Errorf("without a domain: %+v, want none", got)
	}
}

func TestPeerEndpoint(t *testing.T) {
	t.Parallel()
	tests := []struct{ host, want string }{
		{"mydb.cluster-abc.us-east-1.rds.amazonaws.com", "mydb.cluster-ro-abc.us-east-1.rds.amazonaws.com"},
		{"mydb.cluster-ro-abc.us-east-1.rds.amazonaws.com", "mydb.cluster-abc.us-east-1.rds.amazonaws.com"},
		{"MyDB.Cluster-ABC.us-east-1.rds.amazonaws.com.", "mydb.cluster-ro-abc.us-east-1.rds.amazonaws.com"},
		{"mydb.cluster-abc.cn-north-1.rds.amazonaws.com.cn", "mydb.cluster-ro-abc.cn-north-1.rds.amazonaws.com.cn"},
		{"rep.cluster-custom-abc.us-east-1.rds.amazonaws.com", ""},
		{"mydb-1.abc.us-east-1.rds.amazonaws.com", ""},
		{"db.cluster-1.example.com", ""},
		{"10.0.0.1", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := PeerEndpoint(tt.host); got != tt.want {
			t.Errorf("PeerEndpoint(%q) = %q, want %q", tt.host, got, tt.want)
		}
	}
}

func TestKindOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host string
		want Kind
	}{
		{"orders.cluster-abc.us-east-1.rds.amazonaws.com", KindWriterCluster},
		{"orders.cluster-ro-abc.us-east-1.rds.amazonaws.com", KindReaderCluster},
		{"rep.cluster-custom-abc.us-east-1.rds.amazonaws.com", KindCustomCluster},
		{"orders-1.abc.us-east-1.rds.amazonaws.com", KindInstance},
		{"orders-proxy.proxy-abc.us-east-1.rds.amazonaws.com", KindProxy},
		{"ro.endpoint.proxy-abc.us-east-1.rds.amazonaws.com", KindProxy},
		{"orders.global-abc.global.rds.amazonaws.com", KindGlobal},
		{"db.proxy-1.example.com", KindInstance},
		{"db.global-1.example.com", KindInstance},
		{"10.0.0.1", KindInstance},
	}
	for _, tt := range tests {
		if got := KindOf(tt.host); got != tt.want {
			t.Errorf("KindOf(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
}

func TestClusterName(t *testing.T) {
	t.Parallel()
	tests := []struct{ host, name, domain string }{
		{"orders.cluster-abc.us-east-1.rds.amazonaws.com", "orders", "abc.us-east-1.rds.amazonaws.com"},
		{"Billing.Cluster-RO-abc.us-east-1.rds.amazonaws.com.", "billing", "abc.us-east-1.rds.amazonaws.com"},
		{"rep.cluster-custom-abc.us-east-1.rds.amazonaws.com", "", ""},
		{"orders-1.abc.us-east-1.rds.amazonaws.com", "", ""},
		{"orders-proxy.proxy-abc.us-east-1.rds.amazonaws.com", "", ""},
		{"10.0.0.1", "", ""},
	}
	for _, tt := range tests {
		if n, d := ClusterName(tt.host); n != tt.name || d != tt.domain {
			t.Errorf("ClusterName(%q) = %q, %q; want %q, %q", tt.host, n, d, tt.name, tt.domain)
		}
	}
}
