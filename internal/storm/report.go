package storm

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Table writes rs as a Markdown table, one row per run.
func Table(w io.Writer, rs []*Result) error {
	if _, err := fmt.Fprint(w, "| dependency down | strategy | peak during outage ×steady | peak after recovery ×steady | total load ×steady | retries % of first attempts | probes per pod | time to recovery | median pod back | every pod connected |\n"+
		"|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n"); err != nil {
		return err
	}
	for _, r := range rs {
		if _, err := fmt.Fprintf(w, "| %s | %s | %.1f× | %.1f× | %.1f× | %.1f%% | %.1f | %s | %s | %s |\n",
			r.Config.Dependency, r.Config.Strategy.Name, r.PeakOutage, r.PeakAfter, r.Total,
			100*r.RetryShare, r.ProbesPerPod, seconds(r.Recovery), seconds(r.ReconnectedMedian), seconds(r.Reconnected)); err != nil {
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
	Hold       string  `json:"hold,omitempty"` // the outage hold's parameters (Hold.String), if the strategy has one
	Rate       float64 `json:"rate"`           // requests per second per pod
	PeakDuring float64 `json:"peak_during"`    // ×steady
	// PeakDuringVsNoRetry is PeakDuring ÷ the no-retry run's of the same
	// dependency and rate, when the rows have it (else 0).
	PeakDuringVsNoRetry float64 `json:"peak_during_vs_no_retry,omitempty"`
	PeakAfter           float64 `json:"peak_after"`  // ×steady
	Total               float64 `json:"total"`       // ×steady
	RetriesPct          float64 `json:"retries_pct"` // retries, % of first attempts (probes in neither)
	FirstPerPod         float64 `json:"first_per_pod"`
	RetriesPerPod       float64 `json:"retries_per_pod"`
	ProbesPerPod        float64 `json:"probes_per_pod"`
	RecoveryS           float64 `json:"recovery_s"`       // seconds to the last request the outage hurt
	MedianBackS         float64 `json:"median_back_s"`    // the median pod: seconds until it holds a connection again
	EveryPodBackS       float64 `json:"every_pod_back_s"` // the last pod
	// FloorS is the model's floor of MedianBackS at a peak after recovery
	// of 3× steady with one connect per pod; ReconnectAttempts is what a
	// pod makes in its reconnect, and FloorAtAttemptsS the floor with
	// that many.
	FloorS            float64 `json:"floor_s"`
	ReconnectAttempts float64 `json:"reconnect_attempts"`
	FloorAtAttemptsS  float64 `json:"floor_at_attempts_s"`
	Requests          int     `json:"requests"`
	Failed            int     `json:"failed"`
}

// RowOf returns r's figures as a Row (PeakDuringVsNoRetry unset).
func RowOf(r *Result) Row {
	row := Row{
		Dependency:        r.Config.Dependency.String(),
		Strategy:          r.Config.Strategy.Name,
		Rate:              r.Config.RequestRate,
		PeakDuring:        r.PeakOutage,
		PeakAfter:         r.PeakAfter,
		Total:             r.Total,
		RetriesPct:        100 * r.RetryShare,
		FirstPerPod:       r.FirstPerPod,
		RetriesPerPod:     r.RetriesPerPod,
		ProbesPerPod:      r.ProbesPerPod,
		RecoveryS:         r.Recovery.Seconds(),
		MedianBackS:       r.ReconnectedMedian.Seconds(),
		EveryPodBackS:     r.Reconnected.Seconds(),
		FloorS:            r.Floor.Seconds(),
		ReconnectAttempts: r.ReconnectAttempts,
		FloorAtAttemptsS:  r.ReconnectAttempts * r.Floor.Seconds(),
		Requests:          r.Requests,
		Failed:            r.Failed,
	}
	if h := r.Config.Strategy.Hold; h != nil {
		row.Hold = h.String()
	}
	return row
}

// noRetryPeaks returns the peak during the outage of rs' no-retry runs, by
// dependency and rate.
func noRetryPeaks(rs []*Result) func(*Result) float64 {
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
	return func(r *Result) float64 {
		if n := none[key{r.Config.Dependency, r.Config.RequestRate}]; n > 0 {
			return r.PeakOutage / n
		}
		return 0
	}
}

// JSON writes rs as one JSON object, {"rows": [...]}, a [Row] per run.
func JSON(w io.Writer, rs []*Result) error {
	rel := noRetryPeaks(rs)
	rows := make([]Row, len(rs))
	for i, r := range rs {
		rows[i] = RowOf(r)
		rows[i].PeakDuringVsNoRetry = rel(r)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Rows []Row `json:"rows"`
	}{rows})
}

// RateTable writes rs, runs at several request rates, as a Markdown table
// with each run's peak during the outage relative to the run without retry
// of the same dependency and rate (when rs has it), the median pod's
// return beside the model's floor, and the attempts per pod.
func RateTable(w io.Writer, rs []*Result) error {
	rel := noRetryPeaks(rs)
	if _, err := fmt.Fprint(w, "| dependency down | requests/s per pod | strategy | peak during outage ×steady | peak during ÷ no retry's | peak after recovery ×steady | median pod back | floor at 3× steady: 1 connect per pod / the pods' | retries % of first attempts | first attempts / retries / probes per pod | total load ×steady | requests failed |\n"+
		"|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n"); err != nil {
		return err
	}
	for _, r := range rs {
		x := "—"
		if v := rel(r); v > 0 {
			x = fmt.Sprintf("%.2f", v)
		}
		if _, err := fmt.Fprintf(w, "| %s | %g | %s | %.1f× | %s | %.1f× | %s | %.2f s / %.2f s (%.1f) | %.1f%% | %.1f / %.2f / %.1f | %.1f× | %d |\n",
			r.Config.Dependency, r.Config.RequestRate, r.Config.Strategy.Name, r.PeakOutage, x, r.PeakAfter,
			seconds(r.ReconnectedMedian), r.Floor.Seconds(), r.ReconnectAttempts*r.Floor.Seconds(), r.ReconnectAttempts,
			100*r.RetryShare, r.FirstPerPod, r.RetriesPerPod, r.ProbesPerPod, r.Total, r.Failed); err != nil {
			return err
		}
	}
	return nil
}

// DetailTable writes rs as a Markdown table with the median pod's figures
// and the requests that failed: the tables of the admission limits and of
// the hold's variants.
func DetailTable(w io.Writer, rs []*Result) error {
	if _, err := fmt.Fprint(w, "| dependency down | strategy | peak during outage ×steady | peak after recovery ×steady | total load ×steady | retries % of first attempts | probes per pod | time to recovery (last request hurt) | median pod: reconnected | median pod: last request hurt | every pod connected | requests failed | connects not admitted |\n"+
		"|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n"); err != nil {
		return err
	}
	for _, r := range rs {
		if _, err := fmt.Fprintf(w, "| %s | %s | %.1f× | %.1f× | %.1f× | %.1f%% | %.1f | %s | %s | %s | %s | %d | %d |\n",
			r.Config.Dependency, r.Config.Strategy.Name, r.PeakOutage, r.PeakAfter, r.Total, 100*r.RetryShare, r.ProbesPerPod,
			seconds(r.Recovery), seconds(r.ReconnectedMedian), seconds(r.HurtMedian), seconds(r.Reconnected), r.Failed, r.Refused); err != nil {
			return err
		}
	}
	return nil
}
