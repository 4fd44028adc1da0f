package harness

import (
	"context"
	"time"

	"github.com/holdfast-db/holdfast"
	"github.com/holdfast-db/holdfast/readiness"
	"github.com/jackc/pgx/v5/pgxpool"
)

// StartReadiness starts the readiness check of the holdfast pool p, as a
// service would serve it; the caller closes it.
func StartReadiness(ctx context.Context, f *holdfast.Factory, p *pgxpool.Pool) (*readiness.Checker, error) {
	c, err := readiness.New(readiness.Config{Factory: f}, readiness.Pool(p))
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// SampleReadiness asks c every 100 ms, as a prober would (a check runs at
// most once per CheckInterval; in between, the cached result is
// answered), until done is closed, and gives each answer to seen: its
// status, and the answer as the demos print it, "HEALTH" or "HEALTH
// (REASON)" when it is not a pass.
func SampleReadiness(c *readiness.Checker, done <-chan struct{}, seen func(st readiness.Status, answer string)) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		st := c.Check(ctx)
		cancel()
		answer := string(st.Health)
		if st.Health != readiness.Pass {
			answer += " (" + st.Reason + ")"
		}
		seen(st, answer)
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
}
