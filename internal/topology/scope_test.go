package topology_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-db/holdfast/internal/topology"
)

func TestDomainOf(t *testing.T) {
	t.Parallel()
	const d = "abc123.us-east-1.rds.amazonaws.com"
	for host, want := range map[string]string{
		"mydb.cluster-" + d:                              d,
		"mydb.cluster-ro-" + d:                           d,
		"mydb.cluster-custom-" + d:                       d,
		"mydb-1." + d:                                    d,
		"MYDB-1." + d + ".":                              d,
		"proxy.proxy-" + d:                               d,
		"ep.endpoint.proxy-" + d:                         d,
		"mydb-green-abc123.cluster-" + d:                 d,
		"db.cluster-abc.cn-north-1.rds.amazonaws.com.cn": "abc.cn-north-1.rds.amazonaws.com.cn",
		"mydb.global-abc.global.rds.amazonaws.com":       "",
		"db.example.com":                                 "",
		"10.0.0.1":                                       "",
		"mydb.cluster-abc.rds.example":                   "",
		"":                                               "",
		"bad_label.abc123.us-east-1.rds.amazonaws.com":   "",
	} {
		if got := topology.DomainOf(host); got != want {
			t.Errorf("DomainOf(%q) = %q, want %q", host, got, want)
		}
	}
}

// TestScope: a name is in a cluster's scope when configured, or under the
// account and Region domain of a configured RDS endpoint (its cluster,
// reader, custom, proxy and instance endpoints, blue, green or -old1), or
// under a configured template's domain, one label deep; nothing else —
// another account or Region, a name that merely contains the domain, an
// address not configured.
func TestScope(t *testing.T) {
	t.Parallel()
	const d = "abc123.us-east-1.rds.amazonaws.com"
	s := topology.NewScope([]string{"mydb.cluster-" + d, "db.example.com", "10.0.0.1"}, "?.db.internal:6432")
	for host, want := range map[string]bool{
		"mydb.cluster-" + d:                               true,
		"mydb.cluster-ro-" + d:                            true,
		"mydb-green-abc123.cluster-" + d:                  true,
		"mydb-old1.cluster-" + d:                          true,
		"mydb-1." + d:                                     true,
		"MYDB-2." + d + ".":                               true,
		"other.cluster-custom-" + d:                       true, // another endpoint of the account: its domain
		"db.example.com":                                  true, // configured
		"10.0.0.1":                                        true,
		"orders-1.db.internal":                            true, // the template's
		"mydb-2.attacker.example":                         false,
		"mydb.cluster-zzz999.us-east-1.rds.amazonaws.com": false, // another account
		"mydb.cluster-abc123.eu-west-1.rds.amazonaws.com": false, // another Region
		"mydb-1." + d + ".attacker.example":               false,
		"x.mydb-1." + d:                                   false, // two labels deep
		"evil." + d + "x":                                 false,
		d:                                                 false,
		"a.b.db.internal":                                 false,
		"other.example.com":                               false,
		"10.0.0.2":                                        false,
		"":                                                false,
		"bad host." + d:                                   false,
	} {
		if got := s.Contains(host); got != want {
			t.Errorf("Contains(%q) = %v, want %v (scope %s)", host, got, want, s)
		}
	}
	if got := s.Filter([]string{"mydb-1." + d, "mydb-2.attacker.example", "orders-1.db.internal"}); len(got) != 2 ||
		got[0] != "mydb-1."+d || got[1] != "orders-1.db.internal" {
		t.Errorf("Filter = %q", got)
	}
	var zero topology.Scope
	if zero.Contains("mydb-1."+d) || zero.Contains("") {
		t.Error("the zero Scope contains a name")
	}
	if custom := topology.NewScope([]string{"db.example.com"}); custom.Contains("mydb-1."+d) || !custom.Contains("db.example.com") {
		t.Error("a scope of a name of one's own contains more than that name")
	}
}

// TestRetarget: a monitor's config is pointed at a host in the scope,
// its TLS verifying that name; a host outside is refused with an
// *OutsideError, the config left alone.
func TestRetarget(t *testing.T) {
	t.Parallel()
	const d = "abc123.us-east-1.rds.amazonaws.com"
	cc, err := pgx.ParseConfig("postgres://u@mydb.cluster-" + d + ":5432/db?sslmode=verify-full")
	if err != nil {
		t.Fatal(err)
	}
	s := topology.NewScope([]string{cc.Host})
	c := cc.Copy()
	if err := topology.Retarget(c, "mydb-2."+d, 6000, s); err != nil || c.Host != "mydb-2."+d || c.Port != 6000 ||
		c.TLSConfig.ServerName != "mydb-2."+d {
		t.Errorf("Retarget in the scope: %v, host %q port %d, TLS %q", err, c.Host, c.Port, c.TLSConfig.ServerName)
	}
	c = cc.Copy()
	tc := c.TLSConfig
	err = topology.Retarget(c, "mydb-2.attacker.example", 6000, s)
	var oe *topology.OutsideError
	if !errors.As(err, &oe) || !errors.Is(err, topology.ErrOutsideScope) || oe.Host != "mydb-2.attacker.example" {
		t.Errorf("Retarget outside the scope: %v, want an *OutsideError naming the host", err)
	}
	if c.Host != cc.Host || c.Port != cc.Port || c.TLSConfig != tc || c.TLSConfig.ServerName != cc.Host {
		t.Errorf("a refused Retarget changed the config: host %q port %d TLS %q", c.Host, c.Port, c.TLSConfig.ServerName)
	}
}
