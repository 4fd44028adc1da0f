package cfgerr

import "time"

// Duration is a duration field of a configuration whose zero value means
// Default.
type Duration struct {
	Name    string         // the field, as its error names it
	Value   *time.Duration // where it is
	Default time.Duration
}

// SetDefaults sets each zero duration of ds to its default, in order, up
// to the first negative one, which it returns for the caller to report;
// nil when none is negative.
func SetDefaults(ds []Duration) *Duration {
	for i := range ds {
		d := &ds[i]
		if *d.Value < 0 {
			return d
		}
		if *d.Value == 0 {
			*d.Value = d.Default
		}
	}
	return nil
}
