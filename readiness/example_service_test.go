package readiness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/readiness"
	"github.com/holdfast-db/holdfast/sqldb"
)

// A service's wiring, as the package documentation describes it: a
// pgxpool and a *sql.DB over it for the service's database/sql code — one
// database, so one target —, the probes and the service's handlers on its
// port, the details and the drain on an admin listener. A service then
// calls Serve (see Checker.Serve's example); here the handlers answer
// through httptest, against a real PostgreSQL.
func Example_service() {
	ctx := context.Background()
	f, err := holdfast.New()
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(exampleDSN()) // a service: os.Getenv("DATABASE_URL")
	if err != nil {
		log.Fatal(err)
	}
	if err := f.Configure(cfg, holdfast.PoolName("orders")); err != nil {
		log.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg) // no connection yet: Start (or Serve) opens the startup gate
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	db := sqldb.OpenDB(pool) // for database/sql code: its connections come from pool
	defer db.Close()

	c, err := readiness.New(readiness.Config{Factory: f}, readiness.Pool(pool), readiness.DB(db))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	app := http.NewServeMux()
	app.HandleFunc("GET /orders", func(w http.ResponseWriter, r *http.Request) {
		var n int
		if err := db.QueryRowContext(r.Context(), "SELECT 42").Scan(&n); err != nil {
			http.Error(w, "database unavailable", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, n)
	})
	mux := http.NewServeMux()
	mux.Handle("/readyz", c.ReadyHandler()) // 200 or 503, status and reason only; cached, bounded
	mux.Handle("/livez", c.LiveHandler())   // 200 while the process serves
	mux.Handle("/", c.Middleware(app))      // counts requests in flight for the drain
	admin := http.NewServeMux()
	admin.Handle("/readyz", c.AdminHandler()) // targets, blue/green mapping, writer, drain
	admin.Handle("/drain", c.DrainHandler())  // POST drains, DELETE enables: local callers only

	srv, adminSrv := httptest.NewServer(mux), httptest.NewServer(admin) // a service: c.Serve(ctx, srv, ...)
	defer srv.Close()
	defer adminSrv.Close()
	get := func(url string) string {
		resp, err := srv.Client().Get(url)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprint(resp.StatusCode, " ", strings.TrimSpace(string(b)))
	}

	if err := c.Start(ctx); err != nil { // the first connection; Serve does it in the background
		log.Fatal(err)
	}
	fmt.Println("/readyz", get(srv.URL+"/readyz"))
	fmt.Println("/orders", get(srv.URL+"/orders"))

	resp, err := adminSrv.Client().Get(adminSrv.URL + "/readyz")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var details struct {
		Status string
		Checks map[string][]struct {
			ComponentID string
			Status      string
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&details); err != nil {
		log.Fatal(err)
	}
	fmt.Println("admin /readyz", resp.StatusCode, details.Status)
	for _, check := range details.Checks["postgres:responseTime"] {
		fmt.Println("  check", check.ComponentID, check.Status)
	}
	for _, t := range c.Status().Targets {
		fmt.Println("  target", t.Name, t.Kind)
	}
	// Output:
	// /readyz 200 ok
	// /orders 200 42
	// admin /readyz 200 pass
	//   check orders pass
	//   target orders database/sql
}

// exampleDSN returns the connection string of the test binary's
// PostgreSQL (pgtest.DSN: PGTEST_DSN, or the shared server TestMain's
// pgtest.Main stops), for the examples that run against one. An example
// cannot skip: without the server binaries it fails, saying so.
func exampleDSN() string { return pgtest.DSN(exampleTB{}) }

// exampleTB is the testing.TB of exampleDSN: pgtest.DSN calls only these
// methods.
type exampleTB struct{ testing.TB }

func (exampleTB) Helper()           {}
func (exampleTB) Skip(args ...any)  { log.Fatal(append([]any{"readiness examples: "}, args...)...) }
func (exampleTB) Fatal(args ...any) { log.Fatal(append([]any{"readiness examples: "}, args...)...) }
func (exampleTB) Fatalf(format string, args ...any) {
	log.Fatalf("readiness examples: "+format, args...)
}
