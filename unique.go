package litequeue

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Unique jobs: at most one job of a kind with the same payload (or the same
// chosen payload fields), optionally per period and among chosen states. The
// job's queue, kind, chosen payload and period bucket are hashed into a
// uniqueness key stored with the job; a partial unique index on it makes the
// check one indexed lookup and the database enforce it.

// Conflict says what an enqueue of a unique job does when a job with the
// same uniqueness exists (its twin).
type Conflict int8

const (
	// ConflictReturnExisting (the default) enqueues nothing and returns the
	// twin's id with a *UniqueError (errors.Is ErrDuplicate, as for an
	// idempotency key) and an EventDuplicate.
	ConflictReturnExisting Conflict = iota
	// ConflictReplace deletes a pending (ready or scheduled) twin, with its
	// history, and enqueues the new job in the same transaction: an
	// EventReplaced names the twin, and the enqueue returns the new id and
	// nil. A twin that is running, completed or dead is not replaced: the
	// enqueue returns as with ConflictReturnExisting.
	ConflictReplace
	// ConflictReject enqueues nothing and returns id 0 with an error that is
	// ErrUniqueRejected and a *UniqueError naming the twin (errors.As), and
	// an EventDuplicate.
	ConflictReject
)

// ErrUniqueRejected: a unique job with ConflictReject met its twin; nothing
// was enqueued.
var ErrUniqueRejected = errors.New("litequeue: unique job rejected: a job with the same uniqueness exists")

// ErrUnique is what every *UniqueError is (errors.Is), besides ErrDuplicate.
var ErrUnique = store.ErrUnique

// UniqueError reports the twin of a unique job: its id, stored state and
// kind. errors.Is(err, ErrDuplicate) and errors.Is(err, ErrUnique) hold.
type UniqueError = store.UniqueError

// UniqueOptions makes jobs unique beyond an idempotency key: no two jobs of
// the same queue and kind with the same payload (or the same values of
// Fields) exist at once in States, within the same Period. A job type may
// return them from a method UniqueOptions() *UniqueOptions (called on the
// job being enqueued); EnqueueOptions.Unique overrides it for one enqueue.
// The zero value means: whole payload, no period, live states (ready,
// scheduled, running), ConflictReturnExisting. Fields and Period are part
// of the uniqueness: two jobs are twins only if both were enqueued with the
// same Fields and Period (States and OnConflict may differ: the stored
// job's States decide whether it blocks, the new job's OnConflict what
// happens then).
type UniqueOptions struct {
	// Fields are top-level fields of the job's JSON payload that make up its
	// uniqueness; each must be present in the payload. Empty means the
	// whole payload.
	Fields []string
	// Period, when positive, makes jobs unique only within windows of this
	// length aligned to the Unix epoch, by enqueue time (the queue's Clock):
	// with an hour, one job per hour from 10:00 to 11:00, another from
	// 11:00. Zero means no period. Negative is an error.
	Period time.Duration
	// States are the states in which a twin blocks a new job. StateReady and
	// StateScheduled are one stored state (pending): give both or neither.
	// Default (empty): ready, scheduled and running. Add StateCompleted to
	// also block while a twin is retained (Options.CompletedRetention) and
	// StateDead while it is a dead letter, StateCancelled while it is kept
	// cancelled.
	States []State
	// OnConflict is what happens when a twin exists. Default
	// ConflictReturnExisting.
	OnConflict Conflict
}

// stateBits maps the public states to the stored states' bits.
var stateBits = map[State]uint8{
	StateReady: 1 << store.Pending, StateScheduled: 1 << store.Pending,
	StateRunning: 1 << store.Running, StateCompleted: 1 << store.Completed, StateDead: 1 << store.Dead,
	StateCancelled: 1 << store.Cancelled, StateWaiting: 1 << store.Waiting,
}

// uniqueFor validates u and computes the uniqueness of nj (its payload
// encoded) into a store.Unique.
func uniqueFor(u *UniqueOptions, nj *store.NewJob) (*store.Unique, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: UniqueOptions of kind %q: %s", ErrInvalidJob, nj.Kind, fmt.Sprintf(format, args...))
	}
	if u.Period < 0 {
		return nil, bad("negative Period %s; use 0 for no period", u.Period)
	}
	if u.OnConflict < ConflictReturnExisting || u.OnConflict > ConflictReject {
		return nil, bad("unknown OnConflict %d; use ConflictReturnExisting, ConflictReplace or ConflictReject", u.OnConflict)
	}
	var mask uint8
	ready, scheduled := false, false
	for _, s := range u.States {
		bit, ok := stateBits[s]
		if !ok {
			return nil, bad("unknown state %q in States", s)
		}
		ready = ready || s == StateReady
		scheduled = scheduled || s == StateScheduled
		mask |= bit
	}
	if ready != scheduled {
		return nil, bad("States has %s without %s; they are one stored state (pending): give both or neither", map[bool]State{true: StateReady, false: StateScheduled}[ready], map[bool]State{true: StateScheduled, false: StateReady}[ready])
	}
	if mask == 0 {
		mask = 1<<store.Pending | 1<<store.Running
	}
	if u.OnConflict == ConflictReplace && mask&(1<<store.Pending) == 0 {
		return nil, bad("OnConflict is ConflictReplace but States leaves out ready and scheduled, the only states a twin can be replaced in")
	}
	h := sha256.New()
	h.Write([]byte(nj.Queue))
	h.Write([]byte{0})
	h.Write([]byte(nj.Kind))
	h.Write([]byte{0})
	if u.Period > 0 {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(floorDiv(nj.CreatedAt, int64(u.Period))))
		h.Write(b[:])
	}
	h.Write([]byte{0})
	var buf bytes.Buffer
	if len(u.Fields) == 0 {
		if err := json.Compact(&buf, nj.Payload); err != nil {
			return nil, bad("payload is not JSON: %v", err)
		}
	} else {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(nj.Payload, &obj); err != nil {
			return nil, bad("Fields needs a payload that is a JSON object: %v", err)
		}
		fields := slices.Clone(u.Fields)
		slices.Sort(fields)
		fields = slices.Compact(fields)
		for _, f := range fields {
			v, ok := obj[f]
			if !ok {
				return nil, bad("field %q of Fields is not in the payload (it has %s); name top-level JSON fields", f, strings.Join(slices.Sorted(maps.Keys(obj)), ", "))
			}
			fmt.Fprintf(&buf, "%q:", f)
			if err := json.Compact(&buf, v); err != nil {
				return nil, bad("field %q: %v", f, err)
			}
			buf.WriteByte(',')
		}
	}
	h.Write(buf.Bytes())
	return &store.Unique{Key: hex.EncodeToString(h.Sum(nil)[:16]), States: mask, Replace: u.OnConflict == ConflictReplace}, nil
}

// floorDiv is a / b rounded down (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
