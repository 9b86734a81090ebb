package main

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/litequeue/litequeue"
	"github.com/stretchr/testify/require"
)

// groupedFile makes a queue file whose default queue holds jobs of groups
// "a" (two) and "b" (one), enqueued a minute before fixtureNow, and no
// limits; it returns the ids by enqueue order.
func groupedFile(t *testing.T) (string, []int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "queue.db")
	mock := clock.NewMock()
	mock.Set(fixtureNow.Add(-time.Minute))
	q, err := litequeue.Open(path, &litequeue.Options{Clock: mock, PollInterval: -1})
	require.NoError(t, err)
	defer q.Close()
	var ids []int64
	for _, g := range []string{"a", "b", "a"} {
		id, err := q.Enqueue(context.Background(), SendEmail{To: g}, &litequeue.EnqueueOptions{Group: g})
		require.NoError(t, err)
		ids = append(ids, id)
	}
	return path, ids
}

func TestLimitsSetShowAndClear(t *testing.T) {
	path, _ := groupedFile(t)
	r := lq(t, "", "limits", path)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "no limits")

	r = lq(t, "", "limits", path, "set", "default", "--concurrency", "4", "--key-rate", "10/s", "--ordered")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "queue \"default\" limits: concurrency 4, ordered, key rate 10/1s\n", r.stdout)
	// Only the flags given change.
	r = lq(t, "", "limits", "set", path, "default", "--rate", "100/1m30s", "--concurrency", "0")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "queue \"default\" limits: ordered, rate 100/1m30s, key rate 10/1s\n", r.stdout)

	r = lq(t, "", "limits", path, "default")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `QUEUE\s+CONCURRENCY\s+KEY-CONC\s+ORDERED\s+RATE\s+KEY-RATE\n`, r.stdout)
	require.Regexp(t, `default\s+-\s+-\s+yes\s+100/1m30s\s+10/1s\n`, r.stdout)

	r = lq(t, "", "stats", path)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `LIMITS\n`, r.stdout)
	require.Contains(t, r.stdout, "ordered, rate 100/1m30s, key rate 10/1s")

	r = lq(t, "", "limits", path, "set", "default", "--clear")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "queue \"default\" limits: none\n", r.stdout)
	r = lq(t, "", "limits", "--json", path)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.JSONEq(t, `{}`, r.stdout)
}

func TestLimitsSetRefusesBadValuesWithNothingWritten(t *testing.T) {
	path, _ := groupedFile(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--concurrency", "-1"}, "--concurrency -1: use a positive number"},
		{[]string{"--rate", "10"}, `--rate "10": no /PERIOD`},
		{[]string{"--rate", "x/s"}, "N is not a positive whole number"},
		{[]string{"--key-rate", "5/fortnight"}, "PERIOD is not a duration"},
		{[]string{"--rate", "5/1us"}, "PERIOD is under 1ms"},
		{nil, "set: no limit given"},
	} {
		r := lq(t, "", append([]string{"limits", path, "set", "default"}, c.args...)...)
		require.Equal(t, exitUsage, r.code, "%v: %s", c.args, r.stdout)
		require.Contains(t, r.stderr, c.want, c.args)
	}
	r := lq(t, "", "limits", path, "--concurrency", "3")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "lqinspect limits FILE set QUEUE")
	r = lq(t, "", "limits", "--json", path)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.JSONEq(t, `{}`, r.stdout, "nothing was written")
}

func TestGroupsAndShowSayWhyAnOrderedGroupWaits(t *testing.T) {
	path, ids := groupedFile(t)
	r := lq(t, "", "limits", path, "set", "default", "--ordered")
	require.Equal(t, exitOK, r.code, r.stderr)

	r = lq(t, "", "groups", path, "default", "--limit", "1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `GROUP\s+RUNNING\s+PENDING\s+OLDEST PENDING\s+HEAD\n`, r.stdout)
	require.Regexp(t, `a\s+0\s+2\s+1m ago\s+`+strconv.FormatInt(ids[0], 10)+` ready\n`, r.stdout)
	require.Contains(t, r.stdout, "next page: --after \"a\"\n")
	r = lq(t, "", "groups", path, "default", "--after", "a")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `\nb\s+0\s+1\s+`, r.stdout)
	require.NotContains(t, r.stdout, "next page")

	r = lq(t, "", "show", path, strconv.FormatInt(ids[2], 10))
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `group:\s+a\n`, r.stdout)
	require.Regexp(t, `waits:\s+behind job `+strconv.FormatInt(ids[0], 10)+` of its ordered group \(ready\)\n`, r.stdout)
	r = lq(t, "", "show", path, strconv.FormatInt(ids[0], 10))
	require.NotContains(t, r.stdout, "waits:", "the head of its group is claimable")
}

func TestJobsGroupListsThatGroupsJobsWithTheOtherFiltersAndPaging(t *testing.T) {
	path, ids := groupedFile(t)
	idsOf := func(args ...string) []int64 {
		t.Helper()
		var got []litequeue.JobInfo
		decode(t, &got, append([]string{"jobs", path}, args...)...)
		out := []int64{}
		for _, j := range got {
			out = append(out, j.ID)
		}
		return out
	}
	require.Equal(t, []int64{ids[2], ids[0]}, idsOf("--group", "a"))
	require.Equal(t, []int64{ids[1]}, idsOf("--group", "b", "--state", "ready", "--queue", "default"))
	require.Equal(t, []int64{}, idsOf("--group", "a", "--state", "dead"))
	require.Equal(t, []int64{}, idsOf("--group", "nosuch"))
	require.Equal(t, []int64{ids[0], ids[2]}, idsOf("--group", "a", "--order", "next-due"))

	// A page of one names the cursor of the next, which keeps to the group.
	r := lq(t, "", "jobs", path, "--group", "a", "--limit", "1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Regexp(t, `\n`+strconv.FormatInt(ids[2], 10)+`\s+default\s`, r.stdout)
	require.NotContains(t, r.stdout, "\n"+strconv.FormatInt(ids[1], 10)+" ")
	after := strconv.FormatInt(ids[2], 10)
	require.Contains(t, r.stderr, "more match: --after "+after+" for the next page")
	require.Equal(t, []int64{ids[0]}, idsOf("--group", "a", "--after", after))

	var dead []litequeue.JobInfo
	decode(t, &dead, "dead", path, "--group", "a")
	require.Empty(t, dead)

	r = lq(t, "", "jobs", path, "--group", "a", "--tag", "x")
	require.Equal(t, exitUsage, r.code, r.stdout)
	require.Contains(t, r.stderr, "--group and --tag do not combine")
}
