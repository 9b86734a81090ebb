package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

type wfStep struct {
	Name string `json:"name"`
}

func (wfStep) Kind() string { return "step" }

// A workflow a -> b -> c, and d after a: the text graph shows each job's
// state, why b and c wait, and --cancel-all cancels every live job.
func TestWorkflowShowsTheGraphAndCancelsIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "queue.db")
	mock := clock.NewMock()
	mock.Set(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)) // before any "now" the tests give lqinspect: the jobs are ready
	q, err := litequeue.Open(path, &litequeue.Options{Clock: mock, PollInterval: -1})
	require.NoError(t, err)
	var w litequeue.Workflow
	a := w.Add(wfStep{Name: "a"}, nil)
	b := w.Add(wfStep{Name: "b"}, nil)
	c := w.Add(wfStep{Name: "c"}, nil)
	d := w.Add(wfStep{Name: "d"}, nil)
	w.Needs(b, a)
	w.Needs(c, b)
	w.After(d, a)
	ids, err := q.EnqueueWorkflow(context.Background(), &w)
	require.NoError(t, err)
	require.NoError(t, q.Close())

	r := lq(t, "", "workflow", path, fmt.Sprint(ids[c]))
	require.Equal(t, 0, r.code, r.stderr)
	want := fmt.Sprintf(`job %[1]d step [default] ready
job %[2]d step [default] waiting <- %[1]d; waits for 1 of 1 parents: %[1]d (ready)
job %[3]d step [default] waiting <- %[2]d; waits for 1 of 1 parents: %[2]d (waiting)
job %[4]d step [default] waiting <- %[1]d (after); waits for 1 of 1 parents: %[1]d (ready)
`, ids[a], ids[b], ids[c], ids[d])
	require.Equal(t, want, r.stdout)

	r = lq(t, "", "stats", path)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "WAITING")
	require.Regexp(t, `default\s+3\s+1\s`, r.stdout, "3 waiting, 1 ready")

	r = lq(t, "", "workflow", path, fmt.Sprint(ids[b]), "--cancel-all")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "cancelled 4 jobs\n", r.stdout)
	r = lq(t, "", "workflow", path, fmt.Sprint(ids[a]))
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, fmt.Sprintf(`job %[1]d step [default] cancelled
job %[2]d step [default] cancelled <- %[1]d
job %[3]d step [default] cancelled <- %[2]d
job %[4]d step [default] cancelled <- %[1]d (after)
`, ids[a], ids[b], ids[c], ids[d]), r.stdout)

	r = lq(t, "", "workflow", path, "999")
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, "no job with id 999")
}
