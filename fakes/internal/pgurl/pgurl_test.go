package pgurl

import "testing"

func TestSuperuser(t *testing.T) {
	for _, c := range []struct {
		host, db, query string
		extra           []string
		want            string
	}{
		{"127.0.0.1:5432", "postgres", "sslmode=disable", nil, "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"},
		{"[::1]:5432", "app db", "sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem", []string{"connect_timeout=5", "x=y"},
			"postgres://postgres@[::1]:5432/app%20db?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&connect_timeout=5&x=y"},
	} {
		if got := Superuser(c.host, c.db, c.query, c.extra...); got != c.want {
			t.Errorf("Superuser(%q, %q, %q, %q) = %q, want %q", c.host, c.db, c.query, c.extra, got, c.want)
		}
	}
}

func TestEndpoint(t *testing.T) {
	for _, c := range []struct {
		host, ca string
		want     string
	}{
		{"db.example.com", "", "postgres://postgres@db.example.com:5432/postgres?sslmode=disable&connect_timeout=1"},
		{"db.example.com", "/tmp/ca.pem", "postgres://postgres@db.example.com:5432/postgres?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&connect_timeout=1"},
		{"db.example.com:6543", "/tmp/ca.pem", "postgres://postgres@db.example.com:6543/postgres?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&connect_timeout=1"},
		{"127.0.0.11:6543", "/tmp/ca.pem", "postgres://postgres@127.0.0.11:6543/postgres?sslmode=disable&connect_timeout=1"},
	} {
		if got := Endpoint(c.host, 5432, c.ca, "connect_timeout=1"); got != c.want {
			t.Errorf("Endpoint(%q, 5432, %q) = %q, want %q", c.host, c.ca, got, c.want)
		}
	}
}
