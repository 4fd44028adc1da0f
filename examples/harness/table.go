package harness

import (
	"fmt"
	"io"
	"sort"
	"time"
)

// Counts are the figures of one client every demo has. A demo's
// ClientResult embeds them (or [Writes]), which makes it [Counted]; in
// JSON their keys stand as the client's own.
type Counts struct {
	Name     string         `json:"name"` // "pgxpool", "holdfast" or "database/sql"
	Requests int            `json:"requests"`
	OK       int            `json:"ok"`
	Failed   int            `json:"failed"`
	Errors   map[string]int `json:"errors"` // SQLSTATE, or class/reason
}

func (c Counts) counts() Counts { return c }

// Counted is a client's figures that embed [Counts].
type Counted interface{ counts() Counts }

// Count counts c's records: its requests, those that succeeded and those
// that failed, by error key.
func (c *Client) Count() Counts {
	n := Counts{Name: c.Name, Errors: map[string]int{}}
	for _, recs := range c.Recs {
		for _, r := range recs {
			n.Requests++
			if r.Err != "" {
				n.Failed++
				n.Errors[r.Err]++
			} else {
				n.OK++
			}
		}
	}
	return n
}

// Writes are the figures of one client of a write demo (switchover,
// failover): [Counts], and what became of its writes. A demo's
// ClientResult embeds them, which makes it [Written].
type Writes struct {
	Counts
	// Retries counts the runs of transactions after their first, by the
	// workload's own retry (the table's "application retries"): the
	// plain client's hand-written loop, the holdfast clients' runner.
	Retries int `json:"retries"`
	// Runner: its transactions ran through holdfast's runner, and
	// OutcomeUnknown counts its requests whose COMMIT was sent and its
	// answer lost (holdfast.ErrOutcomeUnknown), each then resolved by
	// looking its id up on the writer ([Writer.Do]).
	Runner         bool `json:"runner"`
	OutcomeUnknown int  `json:"outcome_unknown"`
	// Acknowledged counts the requests whose COMMIT succeeded.
	Acknowledged int `json:"acknowledged_writes"`
	// LostWrites: acknowledged ids missing on the writer at the end.
	LostWrites int `json:"lost_writes"`
	// MisplacedWrites: writes that landed where they should not; each
	// demo says where.
	MisplacedWrites int `json:"misplaced_writes"`
}

func (w Writes) writes() Writes { return w }

// Written is a client's figures that embed [Writes].
type Written interface {
	Counted
	writes() Writes
}

// Writes counts c's records as writes: [Client.Count], the retries and
// outcomes unknown, the acknowledged writes and, of them, those whose id
// committed does not hold (lost). MisplacedWrites is left to the demo.
func (c *Client) Writes(committed func(id int64) bool) Writes {
	w := Writes{Counts: c.Count(), Runner: c.Writer != nil && c.Writer.Runner()}
	for _, recs := range c.Recs {
		for _, r := range recs {
			w.Retries += max(r.Attempts-1, 0)
			if r.Unknown {
				w.OutcomeUnknown++
			}
			if r.Err == "" {
				w.Acknowledged++
				if !committed(r.ID) {
					w.LostWrites++
				}
			}
		}
	}
	return w
}

// PausedWrites are [Writes] and the longest pause, figures of the write
// demos global, outage, cloudsql: a demo's ClientResult embeds them, which
// makes it [Written].
type PausedWrites struct {
	Writes
	// MaxPauseMS is the longest time without an acknowledged write.
	MaxPauseMS float64 `json:"max_pause_ms"`
}

// PausedWrites counts c's records as [Client.Writes] does, and its
// longest time without an acknowledged write from begin to stopAt
// ([LongestGap]).
func (c *Client) PausedWrites(committed func(id int64) bool, begin, stopAt time.Time) PausedWrites {
	from, to := LongestGap(begin, stopAt, c.Acks())
	return PausedWrites{Writes: c.Writes(committed), MaxPauseMS: MS(to.Sub(from))}
}

// Table writes a side-by-side table on W: a row a figure, its label in a
// column of LabelWidth, then a column of ColumnWidth per client.
type Table[C Counted] struct {
	W                       io.Writer
	LabelWidth, ColumnWidth int
	Clients                 []C
}

// Row writes the row label, v of each client.
func (t Table[C]) Row(label string, v func(C) string) {
	fmt.Fprintf(t.W, "%-*s", t.LabelWidth, label)
	for _, c := range t.Clients {
		fmt.Fprintf(t.W, " %*s", t.ColumnWidth, v(c))
	}
	fmt.Fprintln(t.W)
}

// Counts writes the rows every demo's table starts with: the clients'
// names, their requests, their failed requests (labelled failed), then a
// row per error key (in key order), named by names, else by the key cut
// to fit.
func (t Table[C]) Counts(failed string, names map[string]string) {
	t.Row("", func(c C) string { return c.counts().Name })
	t.Row("requests", func(c C) string { return fmt.Sprint(c.counts().Requests) })
	t.Row(failed, func(c C) string { return fmt.Sprint(c.counts().Failed) })
	keys := map[string]bool{}
	for _, c := range t.Clients {
		for k := range c.counts().Errors {
			keys[k] = true
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		name, ok := names[k]
		if !ok {
			name = k[:min(len(k), t.LabelWidth-3)]
		}
		t.Row("  "+name, func(c C) string { return fmt.Sprint(c.counts().Errors[k]) })
	}
}

// RetryRows writes a write demo's rows of retries: outcomes unknown ("-"
// for a client without holdfast's runner, which cannot tell) and
// application retries.
func RetryRows[C Written](t Table[C]) {
	t.Row("outcome unknown", func(c C) string {
		if !c.writes().Runner {
			return "-"
		}
		return fmt.Sprint(c.writes().OutcomeUnknown)
	})
	t.Row("application retries", func(c C) string { return fmt.Sprint(c.writes().Retries) })
}

// WriteRows writes a write demo's rows of writes: acknowledged, lost,
// misplaced.
func WriteRows[C Written](t Table[C]) {
	t.Row("acknowledged writes", func(c C) string { return fmt.Sprint(c.writes().Acknowledged) })
	t.Row("lost writes", func(c C) string { return fmt.Sprint(c.writes().LostWrites) })
	t.Row("misplaced writes", func(c C) string { return fmt.Sprint(c.writes().MisplacedWrites) })
}

// Met is a goal's verdict in the table's goals.
func Met(b bool) string {
	if b {
		return "met"
	}
	return "NOT MET"
}
