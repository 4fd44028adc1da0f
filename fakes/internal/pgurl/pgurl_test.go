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
