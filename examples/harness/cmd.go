package harness

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"
)

// Common are the options every demo has. A demo's options embed it, which
// makes them [Options].
type Common struct {
	Workers int           // workers per client
	Think   time.Duration // pause between a worker's requests
	DNSTTL  time.Duration // client-side DNS cache TTL (0: no cache)
	JSON    bool          // print the result as one JSON object
	Verbose bool          // holdfast's logs on stderr
	Name    string        // the deployment's or cluster's name
}

func (c Common) common() Common { return c }

// Options are a demo's options: a struct that embeds [Common].
type Options interface{ common() Common }

// Logger is the logger of the demo's holdfast factory: to stderr with -v,
// else nowhere.
func (c Common) Logger(opts *slog.HandlerOptions) *slog.Logger {
	var w io.Writer = io.Discard
	if c.Verbose {
		w = os.Stderr
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// ClusterTTL is the DNS cache TTL as package failovertest takes it: a
// negative one for none.
func (c Common) ClusterTTL() time.Duration {
	if c.DNSTTL == 0 {
		return -1
	}
	return c.DNSTTL
}

// Command is a demo's command.
type Command[O Options, R any] struct {
	Name string
	// Defaults are the options before the flags.
	Defaults func() O
	// Flags defines the demo's flags into o ([FlagSet.Common] among
	// them) and returns what checks them once parsed: it says what is
	// wrong with [FlagSet.Fail].
	Flags func(o *O, fs *FlagSet) (check func() error)
	// Run runs the demo, writing the progress lines to progress.
	Run func(ctx context.Context, o O, progress io.Writer) (R, error)
	// Print writes the result as the table (and what goes with it).
	Print func(res R, w io.Writer)
}

// Exit runs the command on the process's command line and exits with its
// code.
func (c Command[O, R]) Exit() { os.Exit(c.Main(os.Args[1:], os.Stdout, os.Stderr)) }

// Main runs the command and returns its exit code: 0, 1 when the run
// failed, 2 for a bad command line.
func (c Command[O, R]) Main(args []string, stdout, stderr io.Writer) int {
	o, err := c.Parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2 // Parse has printed the error
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	asJSON := o.common().JSON
	progress := stdout
	if asJSON {
		progress = stderr
	}
	res, err := c.Run(ctx, o, progress)
	if err == nil && asJSON {
		err = WriteJSON(stdout, res)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", c.Name, err)
		return 1
	}
	if !asJSON {
		c.Print(res, stdout)
	}
	return 0
}

// Parse parses the command line into options: usage and errors go to
// errOut (flag.ErrHelp for -h).
func (c Command[O, R]) Parse(args []string, errOut io.Writer) (O, error) {
	o := c.Defaults()
	fs := &FlagSet{FlagSet: flag.NewFlagSet(c.Name, flag.ContinueOnError), errOut: errOut}
	fs.SetOutput(errOut)
	check := c.Flags(&o, fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	return o, check()
}

// WriteJSON writes v as the -json output does: one object, indented.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// FlagSet is a demo's flag set: usage and errors go to its error output,
// each error prefixed with the demo's name.
type FlagSet struct {
	*flag.FlagSet
	errOut io.Writer
}

// Common defines the flags every demo has into c: -workers and -think
// (their usage given), -dns-ttl, -json, -v.
func (fs *FlagSet) Common(c *Common, workers, think string) {
	fs.IntVar(&c.Workers, "workers", c.Workers, workers)
	fs.DurationVar(&c.Think, "think", c.Think, think)
	fs.DurationVar(&c.DNSTTL, "dns-ttl", c.DNSTTL, "client-side DNS cache TTL (0: no cache)")
	fs.BoolVar(&c.JSON, "json", false, "print the result as one JSON object (progress goes to stderr)")
	fs.BoolVar(&c.Verbose, "v", false, "print holdfast's logs on stderr")
}

// SQL defines -sql: a third client, database/sql over a holdfast pool.
func (fs *FlagSet) SQL(p *bool) {
	fs.BoolVar(p, "sql", false, "add a third client: database/sql (package sqldb) over a holdfast pool")
}

// SVG defines -svg: a file to draw the run into (package
// examples/timeline), usage saying what it draws.
func (fs *FlagSet) SVG(p *string, usage string) {
	fs.StringVar(p, "svg", "", usage)
}

// Fail prints the error of format and a on the error output, after the
// demo's name, and returns it.
func (fs *FlagSet) Fail(format string, a ...any) error {
	err := fmt.Errorf(format, a...)
	fmt.Fprintf(fs.errOut, "%s: %v\n", fs.Name(), err)
	return err
}

// CheckWorkers fails unless there is at least one worker per client.
func (fs *FlagSet) CheckWorkers(c Common) error {
	if c.Workers < 1 {
		return fs.Fail("-workers %d: must be at least 1", c.Workers)
	}
	return nil
}

// NonNegative fails on the first of the duration flags named that is
// negative.
func (fs *FlagSet) NonNegative(names ...string) error {
	for _, name := range names {
		if d := fs.Lookup(name).Value.(flag.Getter).Get().(time.Duration); d < 0 {
			return fs.Fail("-%s %v: must not be negative", name, d)
		}
	}
	return nil
}

// Positive fails on the first of the duration flags named that is not
// positive.
func (fs *FlagSet) Positive(names ...string) error {
	for _, name := range names {
		if d := fs.Lookup(name).Value.(flag.Getter).Get().(time.Duration); d <= 0 {
			return fs.Fail("-%s %v: must be positive", name, d)
		}
	}
	return nil
}

// Check fails unless there is at least one worker per client
// ([FlagSet.CheckWorkers]) and the duration flags named are not negative
// ([FlagSet.NonNegative]).
func (fs *FlagSet) Check(c Common, nonNegative ...string) error {
	if err := fs.CheckWorkers(c); err != nil {
		return err
	}
	return fs.NonNegative(nonNegative...)
}
