package litequeue

import (
	"context"
	"fmt"
	"time"

	"github.com/litequeue/litequeue/internal/store"
)

// Why a job waits: the reason Queue.Job gives for a job that is not
// claimable now (docs/flow-control.md).

// WaitKind names why a job that is not running waits.
type WaitKind string

// The kinds of WaitReason.
const (
	WaitParents          WaitKind = "parents"           // a workflow's job waiting for its parents
	WaitPaused           WaitKind = "paused"            // its queue is paused
	WaitScheduled        WaitKind = "scheduled"         // due later (RunAt, a snooze)
	WaitRetry            WaitKind = "retry"             // backing off before its next attempt
	WaitOrdered          WaitKind = "ordered"           // an earlier job of its ordered group is live
	WaitGroupConcurrency WaitKind = "group-concurrency" // its group runs QueueLimits.KeyConcurrency jobs
	WaitConcurrency      WaitKind = "concurrency"       // the queue runs QueueLimits.Concurrency jobs
	WaitRate             WaitKind = "rate"              // the queue's Rate is used up
	WaitGroupRate        WaitKind = "group-rate"        // its group's KeyRate is used up
)

// WaitReason says why a job that is not running is not claimable now.
type WaitReason struct {
	Kind WaitKind `json:"kind"`
	// Until is when the job comes due (WaitScheduled, WaitRetry) or when
	// the rate window lets one more start (WaitRate, WaitGroupRate); zero
	// otherwise.
	Until time.Time `json:"until,omitzero"`
	// Running and Limit are, for the concurrency kinds, the jobs counted
	// as running and the limit; for the rate kinds, the starts in the
	// current window and the limit of starts.
	Running int `json:"running,omitempty"`
	Limit   int `json:"limit,omitempty"`
	// Per is the window of the rate kinds.
	Per time.Duration `json:"per,omitempty"`
	// Behind is, for WaitOrdered, the id of the group's earlier live job
	// that holds this one back, BehindState its state and BehindAttempt
	// the attempts it made (a pending job with attempts is retrying).
	Behind        int64 `json:"behind,omitempty"`
	BehindState   State `json:"behind_state,omitempty"`
	BehindAttempt int   `json:"behind_attempt,omitempty"`
}

// String says the reason in plain words.
func (w WaitReason) String() string {
	at := w.Until.UTC().Format(time.RFC3339)
	switch w.Kind {
	case WaitParents:
		return "waiting for its parent jobs (workflow) to finish"
	case WaitPaused:
		return "its queue is paused"
	case WaitScheduled:
		return "scheduled: due at " + at
	case WaitRetry:
		return "backing off before its next attempt: due at " + at
	case WaitOrdered:
		st := string(w.BehindState)
		if (w.BehindState == StateScheduled || w.BehindState == StateReady) && w.BehindAttempt > 0 {
			st = fmt.Sprintf("retrying after %d attempt%s", w.BehindAttempt, plural(w.BehindAttempt))
		}
		return fmt.Sprintf("behind job %d of its ordered group (%s)", w.Behind, st)
	case WaitGroupConcurrency:
		return fmt.Sprintf("its group has %d of at most %d jobs running", w.Running, w.Limit)
	case WaitConcurrency:
		return fmt.Sprintf("its queue has %d of at most %d jobs running", w.Running, w.Limit)
	case WaitRate:
		return fmt.Sprintf("its queue's rate limit (%d starts per %s) is used up until %s", w.Limit, w.Per, at)
	case WaitGroupRate:
		return fmt.Sprintf("its group's rate limit (%d starts per %s) is used up until %s", w.Limit, w.Per, at)
	}
	return string(w.Kind)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// fillWait sets info.Group and, for a job that is not running and not
// claimable at now, info.Wait.
func (q *Queue) fillWait(ctx context.Context, info *JobInfo, attempt int, now int64) error {
	f, err := q.store.WaitFacts(ctx, info.Queue, info.ID, now)
	if err != nil {
		return err
	}
	info.Group = f.Group
	switch info.State {
	case StateWaiting:
		info.Wait = &WaitReason{Kind: WaitParents}
		return nil
	case StateReady, StateScheduled:
	default:
		return nil
	}
	paused, err := q.store.Paused(ctx)
	if err != nil {
		return err
	}
	if _, ok := paused[info.Queue]; ok {
		info.Wait = &WaitReason{Kind: WaitPaused}
		return nil
	}
	info.Wait = waitOf(f, info.ID, info.State, attempt, info.VisibleAt, now)
	return nil
}

// waitOf is the reason a pending job id in state st (attempts made,
// due at due) waits at now by the facts f; nil if it is claimable.
func waitOf(f store.WaitFacts, id int64, st State, attempt int, due time.Time, now int64) *WaitReason {
	l := f.Limits
	grouped := f.Group != ""
	switch {
	case st == StateScheduled && attempt > 0:
		return &WaitReason{Kind: WaitRetry, Until: due}
	case st == StateScheduled:
		return &WaitReason{Kind: WaitScheduled, Until: due}
	case grouped && l.Ordered && f.Head.ID != 0 && f.Head.ID != id:
		return &WaitReason{Kind: WaitOrdered, Behind: f.Head.ID,
			BehindState: publicState(f.Head.State, f.Head.VisibleAt, now), BehindAttempt: f.Head.Attempt}
	case grouped && l.KeyConcurrency > 0 && f.GroupRunning >= l.KeyConcurrency:
		return &WaitReason{Kind: WaitGroupConcurrency, Running: f.GroupRunning, Limit: l.KeyConcurrency}
	case l.Concurrency > 0 && f.Running >= l.Concurrency:
		return &WaitReason{Kind: WaitConcurrency, Running: f.Running, Limit: l.Concurrency}
	case l.RateN > 0 && f.Starts >= l.RateN:
		return &WaitReason{Kind: WaitRate, Running: f.Starts, Limit: l.RateN, Per: time.Duration(l.RatePer),
			Until: time.Unix(0, f.FirstStart+l.RatePer)}
	case grouped && l.KeyRateN > 0 && f.GroupStarts >= l.KeyRateN:
		return &WaitReason{Kind: WaitGroupRate, Running: f.GroupStarts, Limit: l.KeyRateN, Per: time.Duration(l.KeyRatePer),
			Until: time.Unix(0, f.GroupFirstStart+l.KeyRatePer)}
	}
	return nil
}
