package conn

import "testing"

// TestIsRead: the reader runner re-runs only SQL that reads; anything it
// does not recognise, or that names a write or a lock anywhere, is not.
func TestIsRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sql  string
		want bool
	}{
		{"SELECT 1", true},
		{"  /* c */ select id FROM orders WHERE id = $1", true},
		{"-- note\nWITH x AS (SELECT 1) SELECT * FROM x", true},
		{"(SELECT 1) UNION (SELECT 2)", true},
		{"VALUES (1), (2)", true},
		{"TABLE orders", true},
		{"SHOW search_path", true},
		{"SELECT updated_at FROM orders", true}, // a word, not UPDATE
		{"INSERT INTO orders VALUES (1)", false},
		{"UPDATE orders SET x = 1", false},
		{"DELETE FROM orders", false},
		{"WITH d AS (DELETE FROM orders RETURNING id) SELECT count(*) FROM d", false},
		{"SELECT * INTO copy_of FROM orders", false},
		{"SELECT * FROM orders FOR UPDATE", false},
		{"SELECT * FROM orders FOR KEY SHARE", false},
		{"SELECT nextval('s')", false},
		{"SELECT 'update'", false}, // a literal: not told apart, not re-run
		{"CALL p()", false},
		{"EXPLAIN ANALYZE DELETE FROM orders", false},
		{"BEGIN", false},
		{"", false},
	} {
		if got := IsRead(tc.sql); got != tc.want {
			t.Errorf("IsRead(%q) = %v, want %v", tc.sql, got, tc.want)
		}
	}
}

// TestServerMajor reads the major version of a server_version.
func TestServerMajor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    string
		want int
		ok   bool
	}{
		{"13.14", 13, true},
		{"9.6.24", 9, true},
		{"16beta1", 16, true},
		{"14.10 (Debian 14.10-1.pgdg120+1)", 14, true},
		{"", 0, false},
		{"x", 0, false},
	} {
		if got, ok := serverMajor(tc.v); got != tc.want || ok != tc.ok {
			t.Errorf("serverMajor(%q) = %d, %v, want %d, %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}
