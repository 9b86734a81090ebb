package powercut

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/litequeue/litequeue"

	_ "modernc.org/sqlite"
)

// The children's environment: their role, the queue file, the durability
// (full or process) and extra pragmas of the producer's Open ("," between).
const (
	envRole       = "LQ_POWERCUT_ROLE"
	envDB         = "LQ_POWERCUT_DB"
	envDurability = "LQ_POWERCUT_DURABILITY"
	envPragmas    = "LQ_POWERCUT_PRAGMAS"
	// envCheckpoint, when set, is the wal_autocheckpoint (pages) of every
	// connection of the children.
	envCheckpoint = "LQ_POWERCUT_CHECKPOINT"
)

// plainJob is enqueued with Enqueue; txJob with EnqueueTx beside an
// application row (pc_orders) in the same transaction.
type plainJob struct{ N int }

func (plainJob) Kind() string { return "pc_plain" }

type txJob struct{ N int }

func (txJob) Kind() string { return "pc_tx" }

// appSchema is the application's own tables: an order row per txJob,
// written with it, and an effect row per completed job, written with the
// completion (CompleteTx). seq is the highest job id allocated when the
// completion committed: it orders the completion among the enqueues.
const appSchema = `
CREATE TABLE IF NOT EXISTS pc_orders (id INTEGER PRIMARY KEY, job_id INTEGER NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS pc_effects (job_id INTEGER PRIMARY KEY, kind TEXT NOT NULL, seq INTEGER NOT NULL);`

// appDSN is the application's connection string for the queue file: its
// commits (EnqueueTx, CompleteTx) are as durable as its synchronous level.
func appDSN(path, durability string) string {
	sync := "FULL"
	if durability == "process" {
		sync = "NORMAL"
	}
	return "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=synchronous(" + sync + ")&_txlock=immediate"
}

func durabilityOf(s string) litequeue.Durability {
	if s == "process" {
		return litequeue.DurabilityProcess
	}
	return litequeue.DurabilityFull
}

// TestPowerCutChild is not a test: it is the body of a producer or worker
// process of the power-cut test, run until it is killed. Each line it
// prints is one acknowledgement, written at once in one write: "E id t"
// (Enqueue returned id), "T id t" (EnqueueTx's transaction committed with
// id), "C id t" (the transaction holding job id's CompleteTx and its effect
// committed), t being the wall clock in Unix nanoseconds just after; "open"
// once the queue is open; "X message" for an unexpected error, after which
// it exits.
func TestPowerCutChild(t *testing.T) {
	role := os.Getenv(envRole)
	if role == "" {
		t.Skip("runs only as a producer or worker process of the power-cut test")
	}
	path, durability := os.Getenv(envDB), os.Getenv(envDurability)
	var pragmas []string
	if p := os.Getenv(envPragmas); p != "" {
		pragmas = strings.Split(p, ",")
	}
	dsn := appDSN(path, durability)
	if n := os.Getenv(envCheckpoint); n != "" {
		pragmas = append(pragmas, "wal_autocheckpoint("+n+")")
		dsn += "&_pragma=wal_autocheckpoint(" + n + ")"
	}
	ctx := context.Background()
	fatal := func(format string, args ...any) {
		os.Stdout.WriteString("X " + fmt.Sprintf(format, args...) + "\n")
		os.Exit(2)
	}
	ack := func(kind byte, id int64) {
		os.Stdout.Write(fmt.Appendf(nil, "%c %d %d\n", kind, id, time.Now().UnixNano()))
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		fatal("sql.Open: %v", err)
	}
	db.SetMaxOpenConns(4)
	// Jobs claimed by a worker killed at a cut are claimed again once their
	// lease lapses (a second later), as often as it takes.
	opts := &litequeue.Options{Durability: durabilityOf(durability), PollInterval: 50 * time.Millisecond,
		Queues: []litequeue.QueueConfig{{Name: litequeue.DefaultQueue, Retry: litequeue.FixedRetry(1<<30, 0), VisibilityTimeout: time.Second}}}
	q, err := litequeue.New(db, opts)
	if err != nil {
		fatal("New: %v", err)
	}
	switch role {
	case "producer":
		// Plain jobs go through a queue made by Open, whose Options.Pragmas
		// the fault tests use; transactional ones through New's.
		oq, err := litequeue.Open(path, &litequeue.Options{Durability: opts.Durability, Pragmas: pragmas, PollInterval: -1})
		if err != nil {
			fatal("Open: %v", err)
		}
		os.Stdout.WriteString("open\n")
		var wg sync.WaitGroup
		for g := range 2 {
			wg.Go(func() {
				for i := 0; ; i++ {
					id, err := oq.Enqueue(ctx, plainJob{N: i}, nil)
					if err != nil {
						fatal("Enqueue: %v", err)
					}
					ack('E', id)
				}
			})
			wg.Go(func() {
				for i := 0; ; i++ {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						fatal("BeginTx: %v", err)
					}
					id, err := q.EnqueueTx(ctx, tx, txJob{N: g<<32 | i}, nil)
					if err != nil {
						fatal("EnqueueTx: %v", err)
					}
					if _, err := tx.ExecContext(ctx, `INSERT INTO pc_orders (job_id) VALUES (?)`, id); err != nil {
						fatal("insert order: %v", err)
					}
					if err := tx.Commit(); err != nil {
						fatal("commit EnqueueTx: %v", err)
					}
					ack('T', id)
				}
			})
		}
		wg.Wait()
	case "worker":
		complete := func(ctx context.Context, id int64, kind string, completeTx func(*sql.Tx) error) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, `INSERT INTO pc_effects (job_id, kind, seq)
				VALUES (?, ?, (SELECT seq FROM sqlite_sequence WHERE name = 'lq_jobs'))`, id, kind); err != nil {
				fatal("job %d ran again after its effect was written: %v", id, err)
			}
			if err := completeTx(tx); err != nil {
				return err
			}
			if err := tx.Commit(); err != nil {
				return err
			}
			ack('C', id)
			return nil
		}
		litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[plainJob]) error {
			return complete(ctx, d.ID, d.Kind, func(tx *sql.Tx) error { return d.CompleteTx(ctx, tx) })
		})
		litequeue.Register(q, func(ctx context.Context, d *litequeue.Delivery[txJob]) error {
			return complete(ctx, d.ID, d.Kind, func(tx *sql.Tx) error { return d.CompleteTx(ctx, tx) })
		})
		if err := q.Start(ctx); err != nil {
			fatal("Start: %v", err)
		}
		os.Stdout.WriteString("open\n")
		select {}
	default:
		fatal("unknown role %q", role)
	}
}

// ack is one acknowledgement read from a child.
type ack struct {
	kind byte // E, T or C
	id   int64
	at   int64 // Unix nanoseconds
}

// parseLine reads one line of a child; ok is false for "open".
func parseLine(line string) (a ack, ok bool, err error) {
	if line == "open" {
		return a, false, nil
	}
	if strings.HasPrefix(line, "X ") {
		return a, false, errors.New(line[2:])
	}
	f := strings.Fields(line)
	if len(f) != 3 || len(f[0]) != 1 {
		return a, false, fmt.Errorf("child said %q", line)
	}
	a.kind = f[0][0]
	if a.id, err = strconv.ParseInt(f[1], 10, 64); err == nil {
		a.at, err = strconv.ParseInt(f[2], 10, 64)
	}
	return a, err == nil, err
}
