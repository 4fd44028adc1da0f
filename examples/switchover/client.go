package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/holdfast-db/holdfast/bluegreen"
	"github.com/holdfast-db/holdfast/classify"
	"github.com/holdfast-db/holdfast/examples/harness"
)

const ddl = `CREATE TABLE IF NOT EXISTS public.requests (
	id     bigint PRIMARY KEY,
	client text NOT NULL,
	worker integer NOT NULL,
	at     timestamptz NOT NULL DEFAULT now()
);`

// newClient is a client of the workload that runs its transactions as w
// says: each request inserts a row with a new id (from ids) into
// public.requests, reads it back and commits; a request whose COMMIT's
// outcome is unknown is resolved by looking the id up on the primary
// (harness.Writer.Do).
func newClient(name string, w *harness.Writer, ids *atomic.Int64) *harness.Client {
	insert := w.Insert("INSERT INTO public.requests (id, client, worker) VALUES ($1, $2, $3)")
	work := func(ctx context.Context, tx harness.Tx, id int64, worker int) error {
		if err := tx.Exec(ctx, insert, id, name, worker); err != nil {
			return err
		}
		var got int64
		if err := tx.QueryRow(ctx, "SELECT id FROM public.requests WHERE id = $1", id).Scan(&got); err != nil {
			return err
		}
		if got != id {
			return fmt.Errorf("read back %d, want %d", got, id)
		}
		return nil
	}
	return &harness.Client{Name: name, Writer: w, Request: func(ctx context.Context, worker int, r *harness.Record) error {
		r.ID = ids.Add(1)
		return w.Do(ctx, r, func(ctx context.Context, tx harness.Tx) error { return work(ctx, tx, r.ID, worker) },
			func(ctx context.Context, tx harness.Tx) (found bool, err error) {
				err = tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM public.requests WHERE id = $1)", r.ID).Scan(&found)
				return found, err
			})
	}}
}

// classifier names errors that carry no SQLSTATE.
var classifier = classify.New(bluegreen.Rule)

// errorKey is keyCertName for a certificate not valid for the name (an
// error of the TLS handshake: never one with a SQLSTATE or an unknown
// outcome), else the write demos' key (holdfast's reason for an unknown
// outcome, the SQLSTATE, the class and reason).
func errorKey(err error) string {
	var hn x509.HostnameError
	if errors.As(err, &hn) {
		return keyCertName
	}
	return harness.WriteErrorKey(classifier, err)
}

// keyCertName is the error key of a server certificate not valid for the
// name connected by (sslmode=verify-full).
const keyCertName = "x509-name"
