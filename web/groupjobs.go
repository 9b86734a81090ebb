package web

import (
	"context"
	"strconv"

	"github.com/litequeue/litequeue"
)

// The jobs page of one job group (?jobgroup=G, linked from the groups of
// the queue page): the group's jobs, newest first, with the queue, kind
// and state filters, paged by the same "before" cursor as every listing.

// groupJobs reads the page of f's job group below the job id before (0:
// from the newest), s.opts.PageSize jobs, through Queue.Jobs with
// JobFilter.Group. Next is the id of the page's last job when more match,
// else 0; the page is never Partial (the listing reads the group's rows,
// not a window of ids).
func (s *server) groupJobs(ctx context.Context, f jobFilter, before int64) (litequeue.JobPage, error) {
	jf := litequeue.JobFilter{Queue: f.Queue, Kind: f.Kind, Group: f.JobGroup, Order: litequeue.OrderNewest,
		Limit: s.opts.PageSize + 1}
	if st, err := litequeue.ParseState(f.State); err == nil && f.State != "" {
		jf.States = []litequeue.State{st}
	}
	if before > 0 {
		jf.After = strconv.FormatInt(before, 10)
	}
	jobs, err := s.q.Jobs(ctx, jf)
	if err != nil {
		return litequeue.JobPage{}, err
	}
	var pg litequeue.JobPage
	if len(jobs) > s.opts.PageSize {
		jobs = jobs[:s.opts.PageSize]
		pg.Next = jobs[len(jobs)-1].ID
	}
	pg.Jobs = jobs
	return pg, nil
}
