package litequeuetest

import (
	"errors"
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/internal/sqlite"
	"github.com/litequeue/litequeue/internal/store"
	"github.com/litequeue/litequeue/internal/storetest"
	"github.com/stretchr/testify/require"
)

// The methods of store.Backend and store.Testing that only read (or wait,
// or close): the fault store passes them through. Every other method
// writes, and the fault store must fail it while a write fault is armed. A
// method added to either interface fails this test until it is put in one
// of the two lists.
var (
	storeReads = []string{"Close", "Count", "DeadBefore", "FinishedCounts", "FlowGraph", "LimitsNextFree", "WaitFacts", "Groups", "Flush", "History", "Holds", "Job", "Jobs",
		"LatestDead", "Limits", "LoadOf", "NextDue", "OldestCompleted", "OldestFinished", "ParentResults", "Paused", "Processes", "Progress", "ScheduleHistory",
		"Schedules", "Search", "Stats", "Summaries", "Watch", "WhichCancelled"}
	storeWrites = []string{"AddHistory", "Beat", "Bulk", "Bury", "Cancel", "Claim", "Complete", "CompleteTx",
		"Expire", "Extend", "FireSchedule", "Insert", "InsertClaim", "InsertFlow", "InsertRunning", "Pause", "PauseSchedule",
		"PurgeCancelled", "PurgeCompleted", "Release", "RemoveSchedule", "Report", "Requeue",
		"RequeueCancelled", "Resume", "Retry", "RunNow", "SetLimits", "Snooze", "TriggerSchedule", "Unregister", "UpsertSchedule"}
)

// Every write of the store fails while a write fault is armed, without
// reaching the store below (a nil one here: reaching it would panic).
func TestFaultStoreFailsEveryWrite(t *testing.T) {
	var all []string
	for _, st := range []reflect.Type{reflect.TypeFor[store.Backend](), reflect.TypeFor[store.Testing]()} {
		for i := range st.NumMethod() {
			all = append(all, st.Method(i).Name)
		}
	}
	slices.Sort(all)
	both := append(slices.Clone(storeReads), storeWrites...)
	slices.Sort(both)
	require.Equal(t, all, both, "classify every method of store.Backend and store.Testing as a read or a write in faultstore_internal_test.go (and wrap the writes in faultstore.go)")

	w := &writeFault{}
	w.arm(litequeue.ErrStorageFull, -1)
	fs := reflect.ValueOf(&faultStore{w: w})
	for _, name := range storeWrites {
		m := fs.MethodByName(name)
		args := make([]reflect.Value, m.Type().NumIn())
		var notified error
		for i := range args {
			args[i] = reflect.New(m.Type().In(i)).Elem()
			if m.Type().In(i) == reflect.TypeFor[store.Completion]() {
				args[i] = reflect.ValueOf(store.Completion{Notify: func(err error) { notified = err }})
			}
		}
		var err error
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Errorf("%s reached the store below while writes fail: %v", name, v)
				}
			}()
			out := m.Call(args)
			if len(out) == 0 {
				err = notified
				return
			}
			err, _ = out[len(out)-1].Interface().(error)
		}()
		require.True(t, errors.Is(err, litequeue.ErrStorageFull), "%s returned %v", name, err)
	}
	_, total := w.count()
	require.Equal(t, len(storeWrites), total)
}

// The injected error reads like the SQLite store's and wraps the sentinel.
func TestInjectedErrorReadsLikeTheStores(t *testing.T) {
	err := injected(litequeue.ErrStorageFull)
	require.ErrorIs(t, err, litequeue.ErrStorageFull)
	require.Equal(t, "litequeue: disk full: database or disk is full (13) [injected by litequeuetest]", err.Error())
	mine := errors.New("database is locked")
	require.ErrorIs(t, injected(mine), mine)
}

// The fault store, with no fault armed, is a store like the one it wraps:
// it passes the store-level suite.
func TestFaultStorePassesTheStoreSuite(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		Fresh: func(t *testing.T) string { return filepath.Join(t.TempDir(), "q.db") },
		Open: func(t *testing.T, path string) store.Backend {
			s, err := sqlite.Open(path, sqlite.Options{BusyTimeout: 5 * time.Second, Synchronous: "NORMAL", Logger: slog.Default()})
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
			return &faultStore{Backend: s, w: &writeFault{}}
		},
	})
}
