package litequeue

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/litequeue/litequeue/internal/store"
)

// Cursor paging of job listings: JobInfo.Cursor names a job's place in an
// order, and JobFilter.After starts the next page just after that place.
// Unlike an offset, a cursor costs the same on the thousandth page as on
// the first, and a job inserted or removed meanwhile shifts no page.

// ErrBadCursor is returned (wrapped) by Jobs and DeadLetters for a
// JobFilter.After that is not a cursor JobInfo.Cursor returns for the
// filter's Order.
var ErrBadCursor = errors.New("litequeue: bad cursor: pass a value of JobInfo.Cursor for the listing's order")

// Cursor returns j's place in a listing in order, for JobFilter.After: its
// id for OrderNewest (and ""), "due:priority:id" for OrderNextDue (due in
// Unix nanoseconds). The text is opaque: its form may change between
// versions. An unknown order returns "".
func (j JobInfo) Cursor(order Order) string {
	switch order {
	case OrderNewest, "":
		return strconv.FormatInt(j.ID, 10)
	case OrderNextDue:
		return strconv.FormatInt(j.VisibleAt.UnixNano(), 10) + ":" + strconv.Itoa(j.Priority) + ":" + strconv.FormatInt(j.ID, 10)
	}
	return ""
}

// parseCursor reads after, a cursor of order (already checked), into sf.
// An empty after leaves sf alone.
func parseCursor(after string, order Order, sf *store.JobFilter) error {
	if after == "" {
		return nil
	}
	bad := func() error { return fmt.Errorf("%w (order %q, got %q)", ErrBadCursor, order, after) }
	parts := strings.Split(after, ":")
	nums := make([]int64, len(parts))
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return bad()
		}
		nums[i] = n
	}
	switch {
	case order == OrderNextDue && len(nums) == 3 && nums[1] == int64(int32(nums[1])):
		sf.After = &store.Cursor{Due: nums[0], Priority: int(nums[1]), ID: nums[2]}
	case order != OrderNextDue && len(nums) == 1:
		sf.After = &store.Cursor{ID: nums[0]}
	default:
		return bad()
	}
	return nil
}
