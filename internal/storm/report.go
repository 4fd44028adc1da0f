package storm

import (
	"fmt"
	"io"
	"time"
)

// Table writes rs as a Markdown table, one row per run.
func Table(w io.Writer, rs []*Result) error {
	if _, err := fmt.Fprint(w, "| dependency down | strategy | peak during outage ×steady | peak after recovery ×steady | total load ×steady | retries % of first attempts | time to recovery | every pod connected |\n"+
		"|---|---|--:|--:|--:|--:|--:|--:|\n"); err != nil {
		return err
	}
	for _, r := range rs {
		if _, err := fmt.Fprintf(w, "| %s | %s | %.1f× | %.1f× | %.1f× | %.1f%% | %s | %s |\n",
			r.Config.Dependency, r.Config.Strategy.Name, r.PeakOutage, r.PeakAfter, r.Total,
			100*r.RetryShare, seconds(r.Recovery), seconds(r.Reconnected)); err != nil {
			return err
		}
	}
	return nil
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
