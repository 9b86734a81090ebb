package postgres

import "github.com/litequeue/litequeue"

// Options are the settings of a queue on PostgreSQL: the queue's own
// (litequeue.Options, whose SQLite settings BusyTimeout and Pragmas are
// ignored here) and the settings only PostgreSQL reads. A nil *Options
// means defaults.
type Options struct {
	litequeue.Options

	// ListenURL is where the queue's listening connection, which hears the
	// LISTEN/NOTIFY wake-ups, connects instead of taking a connection of
	// the queue's pool: a postgres:// URL or key=value DSN that reaches the
	// queue's database directly when the pool goes through a pooler in
	// transaction mode, which passes no notifications on. That one
	// connection stays open while the queue runs; every other statement
	// still uses the pool. OpenWith and NewWith connect to it once and
	// refuse one that reaches another database than the queue's with
	// ErrListenElsewhere. Default empty: one of the pool's connections
	// listens (or the deprecated litequeue.Options.ListenURL, when that is
	// set).
	ListenURL string
}

// pgOptions are the options of Open and New, which take the queue's own
// options alone: their deprecated ListenURL is honoured.
func pgOptions(opts *litequeue.Options) *Options {
	if opts == nil {
		return nil
	}
	//lint:ignore SA1019 Open and New honour the deprecated field.
	return &Options{Options: *opts, ListenURL: opts.ListenURL}
}

// listenURL is the listening connection's URL: ListenURL, else the
// deprecated one of the queue's options.
func (o *Options) listenURL() string {
	if o.ListenURL != "" {
		return o.ListenURL
	}
	//lint:ignore SA1019 the deprecated field is honoured for one release.
	return o.Options.ListenURL
}
