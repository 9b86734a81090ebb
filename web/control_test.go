package web_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
	"github.com/litequeue/litequeue/web"
)

// The job page offers Cancel for a running job; cancelling it stops the
// handler of the worker (here another queue on the file, as another
// process would be) and the job stays, cancelled, with a Delete button.
func TestCancelARunningJobFromTheJobPage(t *testing.T) {
	f := newFixture(t, nil)
	worker, err := litequeue.Open(f.path, &litequeue.Options{PollInterval: 5 * time.Millisecond})
	require.NoError(t, err)
	defer worker.Close()
	started, causes := make(chan struct{}, 1), make(chan error, 1)
	litequeue.Register(worker, func(ctx context.Context, d *litequeue.Delivery[Email]) error {
		started <- struct{}{}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	})
	ctx := context.Background()
	require.NoError(t, worker.Start(ctx))
	id, err := f.q.Enqueue(ctx, Email{To: "slow"}, nil)
	require.NoError(t, err)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not start")
	}

	d := serve(t, web.Handler(f.q, nil))
	jobURL := "/jobs/" + itoa(id)
	body := d.open(jobURL)
	require.Contains(t, body, `action="/jobs/`+itoa(id)+`/cancel"`)
	code, body, _ := d.send(jobURL+"/cancel", nil)
	require.Equal(t, http.StatusOK, code, "a running job: a confirmation first")
	require.Contains(t, body, "Cancel running job "+itoa(id)+"?")
	require.Contains(t, body, `<input type="hidden" name="confirm" value="yes">`)
	j, err := f.q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateRunning, j.State, "nothing done before the confirmation")
	loc, _ := d.act(jobURL+"/cancel", url.Values{"confirm": {"yes"}})
	require.Contains(t, loc, "/jobs/"+itoa(id)+"?done=")
	select {
	case cause := <-causes:
		require.True(t, errors.Is(cause, litequeue.ErrJobCancelled), "cause %v", cause)
	case <-time.After(10 * time.Second):
		t.Fatal("the handler was not stopped")
	}
	j, err = f.q.Job(ctx, id)
	require.NoError(t, err)
	require.Equal(t, litequeue.StateCancelled, j.State)
	_, body, _ = d.get(jobURL)
	require.Contains(t, body, `action="/jobs/`+itoa(id)+`/delete"`)
	require.NotContains(t, body, `action="/jobs/`+itoa(id)+`/cancel"`)
}

func itoa(id int64) string { return strconv.FormatInt(id, 10) }
