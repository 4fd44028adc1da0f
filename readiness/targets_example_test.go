package readiness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http/httptest"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/readiness"
	"github.com/holdfast-db/holdfast/sqldb"
)

// One Checker over a service's two databases: a pgxpool for orders, and a
// *sql.DB (package sqldb) for reports that the service can do without for a
// while. Each check is named after its pool (holdfast.PoolName). No
// database is contacted here: nothing is started.
func ExampleNew() {
	ctx := context.Background()
	f, err := holdfast.New()
	if err != nil {
		log.Fatal(err)
	}
	newPool := func(url, name string) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			log.Fatal(err)
		}
		if err := f.Configure(cfg, holdfast.PoolName(name)); err != nil {
			log.Fatal(err)
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg) // connects on first use
		if err != nil {
			log.Fatal(err)
		}
		return pool
	}
	orders := newPool("postgres://app@127.0.0.1:1/orders", "orders")
	defer orders.Close()
	reportsPool := newPool("postgres://app@127.0.0.1:1/reports", "reports")
	defer reportsPool.Close()
	reports := sqldb.OpenDB(reportsPool) // sqldb.PoolOf(reports) is reportsPool
	defer reports.Close()

	c, err := readiness.New(readiness.Config{Factory: f},
		readiness.Pool(orders),
		readiness.Target{DB: reports, Optional: true}, // fails only warn
	)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s := c.Status()
	for _, t := range s.Targets {
		fmt.Println(t.Name, t.Kind, "optional:", t.Optional, t.Health, t.Reason)
	}
	fmt.Println(s)

	// Two checks of one name are a configuration error.
	_, err = readiness.New(readiness.Config{Factory: f},
		readiness.Pool(orders), readiness.Target{DB: reports, Name: "orders"})
	fmt.Println(err)
	// Output:
	// orders pgxpool optional: false fail starting
	// reports database/sql optional: true fail starting
	// not ready: starting (orders)
	// readiness: invalid targets[1].Name: "orders" is also the name of targets[0], another database: give one of them a Name of its own
}

// The names a Checker serves: a target's Name, else its pool's given name
// (holdfast.PoolName), else "database",
// "database-2", ...; never the database's address, which only its log
// lines carry. No database is contacted here.
func ExampleTarget() {
	ctx := context.Background()
	f, err := holdfast.New()
	if err != nil {
		log.Fatal(err)
	}
	newPool := func(url string, opts ...holdfast.PoolOption) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			log.Fatal(err)
		}
		if err := f.Configure(cfg, opts...); err != nil {
			log.Fatal(err)
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg) // connects on first use
		if err != nil {
			log.Fatal(err)
		}
		return pool
	}
	orders := newPool("postgres://app@127.0.0.1:1/orders", holdfast.PoolName("orders"))
	defer orders.Close()
	cache := newPool("postgres://app@127.0.0.1:1/cache")
	defer cache.Close()
	audit := newPool("postgres://app@127.0.0.1:1/audit")
	defer audit.Close()

	c, err := readiness.New(readiness.Config{Factory: f},
		readiness.Pool(orders), readiness.Pool(cache), readiness.Pool(audit))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/admin", nil)
	req.RemoteAddr, req.Host = "127.0.0.1:40000", "localhost" // a local caller: the admin handler answers it
	c.AdminHandler().ServeHTTP(rec, req)
	var body struct {
		Checks map[string][]struct {
			ComponentID string `json:"componentId"`
			Status      string `json:"status"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		log.Fatal(err)
	}
	for _, check := range body.Checks["startup"] {
		fmt.Println(check.ComponentID, check.Status)
	}
	fmt.Println(strings.Contains(rec.Body.String(), "127.0.0.1"))
	// Output:
	// orders fail
	// database fail
	// database-2 fail
	// false
}
