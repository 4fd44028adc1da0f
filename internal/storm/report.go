package storm

import (
	"encoding/json"
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

// Row is one run as cmd/storm -json prints it.
type Row struct {
	Dependency string  `json:"dependency"`
	Strategy   string  `json:"strategy"`
	Rate       float64 `json:"rate"`        // requests per second per pod
	PeakDuring float64 `json:"peak_during"` // ×steady
	PeakAfter  float64 `json:"peak_after"`  // ×steady
	Total      float64 `json:"total"`       // ×steady
	RetriesPct float64 `json:"retries_pct"` // retries, % of first attempts
	RecoveryS  float64 `json:"recovery_s"`  // seconds
}

// RowOf returns r's figures as a Row.
func RowOf(r *Result) Row {
	return Row{
		Dependency: r.Config.Dependency.String(),
		Strategy:   r.Config.Strategy.Name,
		Rate:       r.Config.RequestRate,
		PeakDuring: r.PeakOutage,
		PeakAfter:  r.PeakAfter,
		Total:      r.Total,
		RetriesPct: 100 * r.RetryShare,
		RecoveryS:  r.Recovery.Seconds(),
	}
}

// JSON writes rs as one JSON object, {"rows": [...]}, a [Row] per run.
func JSON(w io.Writer, rs []*Result) error {
	rows := make([]Row, len(rs))
	for i, r := range rs {
		rows[i] = RowOf(r)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Rows []Row `json:"rows"`
	}{rows})
}

// RateTable writes rs, runs at several request rates, as a Markdown table
// with each run's peak during the outage relative to the run without retry
// of the same dependency and rate (when rs has it).
func RateTable(w io.Writer, rs []*Result) error {
	type key struct {
		d    Dependency
		rate float64
	}
	none := map[key]float64{}
	for _, r := range rs {
		if r.Config.Strategy.Name == NoRetry {
			none[key{r.Config.Dependency, r.Config.RequestRate}] = r.PeakOutage
		}
	}
	if _, err := fmt.Fprint(w, "| dependency down | requests/s per pod | strategy | peak during outage ×steady | peak during ÷ no retry's | peak after recovery ×steady | total load ×steady | retries % of first attempts | time to recovery |\n"+
		"|---|--:|---|--:|--:|--:|--:|--:|--:|\n"); err != nil {
		return err
	}
	for _, r := range rs {
		rel := "—"
		if n := none[key{r.Config.Dependency, r.Config.RequestRate}]; n > 0 {
			rel = fmt.Sprintf("%.2f", r.PeakOutage/n)
		}
		if _, err := fmt.Fprintf(w, "| %s | %g | %s | %.1f× | %s | %.1f× | %.1f× | %.1f%% | %s |\n",
			r.Config.Dependency, r.Config.RequestRate, r.Config.Strategy.Name, r.PeakOutage, rel, r.PeakAfter, r.Total,
			100*r.RetryShare, seconds(r.Recovery)); err != nil {
			return err
		}
	}
	return nil
}
