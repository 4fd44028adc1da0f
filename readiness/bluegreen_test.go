package readiness_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/fakes/pgtest"
	"github.com/holdfast-db/holdfast/readiness"
	"github.com/jackc/pgx/v5/pgxpool"
)

// With holdfast.WithBlueGreen, the readiness JSON carries the blue/green
// status of the pool; without it, no such check.
func TestReadinessJSONShowsBlueGreen(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a blue/green deployment of real servers: skipped with -short")
	}
	for _, tc := range []struct {
		name string
		opts []holdfast.Option
		want bool
	}{
		{"with blue/green", []holdfast.Option{holdfast.WithBlueGreen(bluegreen.Config{})}, true},
		{"without", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := holdfast.New(tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cfg, err := pgxpool.ParseConfig(pgtest.DSN(t) + "&sslmode=disable")
			if err != nil {
				t.Fatal(err)
			}
			pool, err := f.NewPool(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			c, err := readiness.New(readiness.Config{Factory: f}, readiness.Pool(pool))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Start(context.Background()); err != nil {
				t.Fatal(err)
			}

			body, err := readyHealthJSON(c)
			if err != nil {
				t.Fatal(err)
			}
			bg, ok := body.Checks["bluegreen"]
			if ok != tc.want {
				t.Fatalf("bluegreen check present = %v, want %v; body %s", ok, tc.want, body.raw)
			}
			if !tc.want {
				return
			}
			var check struct {
				Status string `json:"status"`
				Phase  string `json:"phase"`
				Normal bool   `json:"normal"`
			}
			if err := json.Unmarshal(bg[0], &check); err != nil {
				t.Fatal(err)
			}
			if check.Status != "pass" || check.Phase != "NOT_CREATED" || !check.Normal {
				t.Errorf("bluegreen check = %+v, want pass, NOT_CREATED, normal routing", check)
			}
			if st := c.Status(); st.BlueGreen == nil || st.BlueGreen.Phase != bluegreen.NotCreated {
				t.Errorf("Status().BlueGreen = %+v", st.BlueGreen)
			}
		})
	}
}
