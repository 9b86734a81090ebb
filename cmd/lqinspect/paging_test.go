package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue"
)

// pagingFile writes a file of n ping jobs, due around fixtureNow (every
// third one ahead of it) at three priorities, every tenth cancelled, and
// returns its path.
func pagingFile(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "paging.db")
	clk := clock.NewMock()
	clk.Set(fixtureNow)
	q, err := litequeue.Open(path, &litequeue.Options{PollInterval: -1, Clock: clk})
	require.NoError(t, err)
	items := make([]litequeue.BatchItem, n)
	for i := range items {
		due := fixtureNow.Add(time.Duration(i%7-4) * time.Minute)
		items[i] = litequeue.BatchItem{Job: Ping{}, Options: &litequeue.EnqueueOptions{RunAt: due, Priority: i % 3}}
	}
	ids, err := q.EnqueueBatch(context.Background(), items)
	require.NoError(t, err)
	for i, r := range ids {
		if i%10 == 0 {
			_, err := q.Cancel(context.Background(), r)
			require.NoError(t, err)
		}
	}
	require.NoError(t, q.Close())
	return path
}

var afterNote = regexp.MustCompile(`^showing (\d+); more match: --after (\S+) for the next page, or --limit 0 for all\n$`)

// jsonIDs decodes a JSON listing into its ids.
func jsonIDs(t *testing.T, out string) []int64 {
	t.Helper()
	var jobs []litequeue.JobInfo
	require.NoError(t, json.Unmarshal([]byte(out), &jobs), out)
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

func TestJobsShowsAPageOf100AndTheCursorOfTheNext(t *testing.T) {
	path := pagingFile(t, 2500)
	for _, order := range []string{"newest", "next-due"} {
		all := lq(t, "", "jobs", path, "--order", order, "--limit", "0", "--json")
		require.Equal(t, exitOK, all.code, all.stderr)
		require.Empty(t, all.stderr)
		want := jsonIDs(t, all.stdout)

		var got []int64
		args := []string{"jobs", path, "--order", order, "--json"}
		for page := 0; ; page++ {
			require.Less(t, page, 100, "paging never ended")
			r := lq(t, "", args...)
			require.Equal(t, exitOK, r.code, r.stderr)
			ids := jsonIDs(t, r.stdout)
			got = append(got, ids...)
			if page == 0 {
				require.NotEmpty(t, r.stderr, "the first page says more match")
			}
			if r.stderr == "" {
				break
			}
			m := afterNote.FindStringSubmatch(r.stderr)
			require.NotNil(t, m, "note %q", r.stderr)
			require.Equal(t, "100", m[1])
			require.Len(t, ids, 100)
			args = []string{"jobs", path, "--order", order, "--json", "--after", m[2]}
		}
		require.Equal(t, want, got, "order %s: the pages of 100 by --after make the whole listing", order)
	}
}

func TestJobsLimitZeroListsEveryMatchPageByPage(t *testing.T) {
	path := pagingFile(t, 2500) // more than two pages of streamPage
	r := lq(t, "", "jobs", path, "--limit", "0", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	ids := jsonIDs(t, r.stdout)
	require.Len(t, ids, 2500)
	for i := 1; i < len(ids); i++ {
		require.Equal(t, ids[i-1]-1, ids[i], "newest first, each job once")
	}

	r = lq(t, "", "jobs", path, "--limit", "0")
	require.Equal(t, exitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 2501, "one header and a row per job")
	require.True(t, strings.HasPrefix(lines[0], "ID "), lines[0])
	require.True(t, strings.HasPrefix(lines[1], "2500 "), lines[1])
	require.True(t, strings.HasPrefix(lines[2500], "1 "), lines[2500])
	for _, l := range lines[1:] {
		require.False(t, strings.HasPrefix(l, "ID "), "a header inside the listing")
	}

	r = lq(t, "", "dead", path, "--limit", "0", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "[]\n", r.stdout)
}

func TestJobsNextDueWithoutStateListsLiveJobsOnly(t *testing.T) {
	path := pagingFile(t, 50)
	var got []litequeue.JobInfo
	decode(t, &got, "jobs", path, "--order", "next-due")
	require.Len(t, got, 45, "the 5 cancelled jobs are left out")
	for i, j := range got {
		require.Contains(t, []litequeue.State{litequeue.StateReady, litequeue.StateScheduled}, j.State)
		if i > 0 {
			require.False(t, j.VisibleAt.Before(got[i-1].VisibleAt), "next-due order")
		}
	}
	decode(t, &got, "jobs", path, "--order", "next-due", "--state", "cancelled")
	require.Len(t, got, 5, "a --state still selects")
}

func TestJobsRefusesADeepOffsetAndABadCursor(t *testing.T) {
	path := pagingFile(t, 5)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"jobs", path, "--offset", "10001"}, "--offset 10001 is past 10000, too many rows to skip; page with --after CURSOR"},
		{[]string{"dead", path, "--offset", "20000"}, "page with --after CURSOR"},
		{[]string{"jobs", path, "--after", "12:0:3"}, `--after "12:0:3" is not a cursor of --order newest`},
		{[]string{"jobs", path, "--order", "next-due", "--after", "12"}, `--after "12" is not a cursor of --order next-due`},
		{[]string{"jobs", path, "--tag", "x", "--after", "x"}, `--after "x" is not a cursor of --order newest`},
	} {
		r := lq(t, "", c.args...)
		require.Equal(t, exitUsage, r.code, "%v: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.msg, c.args)
	}
	r := lq(t, "", "jobs", path, "--offset", "10000")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "no jobs\n", r.stdout)
}
