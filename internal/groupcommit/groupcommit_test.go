package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/litequeue/litequeue/internal/store"
)

// waitLimit bounds every wait for an event; no test asserts speed.
const waitLimit = 10 * time.Second

// recorder is a commit function that records its batches and can be held
// shut, so that ops pile up behind the batch it is committing.
type recorder struct {
	mu      sync.Mutex
	batches [][]int // the Work of each batch's ops
	cs      [][]store.Completion
	where   []string      // the goroutine of each commit
	gate    chan struct{} // when set, each commit waits for a value
	entered chan struct{} // a value per commit started
	running atomic.Int32
	most    atomic.Int32 // the most commits running at once
}

func newRecorder(gated bool) *recorder {
	r := &recorder{entered: make(chan struct{}, 1000)}
	if gated {
		r.gate = make(chan struct{})
	}
	return r
}

func (r *recorder) commit(ops []*Op[int], cs []store.Completion) {
	n := r.running.Add(1)
	for {
		m := r.most.Load()
		if n <= m || r.most.CompareAndSwap(m, n) {
			break
		}
	}
	r.entered <- struct{}{}
	if r.gate != nil {
		<-r.gate
	}
	work := make([]int, len(ops))
	for i, o := range ops {
		work[i] = o.Work
		if o.Work < 0 {
			o.Err = fmt.Errorf("op %d failed", o.Work)
		}
	}
	r.mu.Lock()
	r.where = append(r.where, goid())
	r.batches = append(r.batches, work)
	r.cs = append(r.cs, cs)
	r.mu.Unlock()
	r.running.Add(-1)
}

func (r *recorder) snapshot() [][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]int(nil), r.batches...)
}

func (r *recorder) goroutines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.where...)
}

func waitEntered(t *testing.T, r *recorder) {
	t.Helper()
	select {
	case <-r.entered:
	case <-time.After(waitLimit):
		t.Fatal("no commit started")
	}
}

// submitAsync submits work on its own goroutine; its outcome arrives on the
// returned channel.
func submitAsync[W any](w *Writer[W], ctx context.Context, work W) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- w.Submit(&Op[W]{Ctx: ctx, Work: work}) }()
	return ch
}

func wantResult(t *testing.T, ch <-chan error, want string) {
	t.Helper()
	select {
	case err := <-ch:
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Fatalf("Submit returned %q, want %q", got, want)
		}
	case <-time.After(waitLimit):
		t.Fatal("Submit did not return")
	}
}

// closeWithin closes w, failing the test if Close does not return.
func closeWithin[W any](t *testing.T, w *Writer[W]) {
	t.Helper()
	closed := make(chan struct{})
	go func() { w.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(waitLimit):
		t.Fatal("Close did not return")
	}
}

// eventually waits (bounded) until cond holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, waitLimit, time.Millisecond, "waiting until %s", what)
}

// holding starts a writer whose first batch, op 1, is committing and held
// there until the test sends on the recorder's gate (or closes it); the
// writer is closed at the end of the test.
func holding(t *testing.T, opts Options) (*recorder, *Writer[int], <-chan error) {
	r := newRecorder(true)
	w := New(opts, r.commit)
	t.Cleanup(func() { closeWithin(t, w) })
	first := submitAsync(w, context.Background(), 1)
	waitEntered(t, r)
	return r, w, first
}

func TestOpsWaitingBehindACommitShareTheNextBatch(t *testing.T) {
	r, w, first := holding(t, Options{})
	// While batch [1] commits, three more ops arrive.
	rest := []<-chan error{submitAsync(w, context.Background(), 2), submitAsync(w, context.Background(), -3), submitAsync(w, context.Background(), 4)}
	eventually(t, "three ops wait", func() bool { return len(w.ops) == 3 })
	r.gate <- struct{}{}
	wantResult(t, first, "")
	waitEntered(t, r)
	r.gate <- struct{}{}
	wantResult(t, rest[0], "")
	wantResult(t, rest[1], "op -3 failed") // its own outcome only
	wantResult(t, rest[2], "")
	got := r.snapshot()
	if len(got) != 2 || len(got[0]) != 1 || len(got[1]) != 3 {
		t.Fatalf("batches %v, want [[1] [the other three]]", got)
	}
}

func TestCompletionsJoinTheNextBatchAndArePending(t *testing.T) {
	r, w, first := holding(t, Options{})
	for i := range 5 {
		w.Complete(store.Completion{Lease: store.Lease{ID: int64(i)}})
	}
	if n := w.Pending(); n != 5 {
		t.Fatalf("Pending = %d while a batch commits, want 5", n)
	}
	r.gate <- struct{}{}
	wantResult(t, first, "")
	waitEntered(t, r) // the completions go without any op
	r.gate <- struct{}{}
	eventually(t, "the completions' batch is recorded", func() bool { return len(r.snapshot()) == 2 })
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.batches[1]) != 0 || len(r.cs[1]) != 5 || len(r.cs[0]) != 0 {
		t.Fatalf("batches %v with %d and %d completions, want the 5 completions alone in the second", r.batches, len(r.cs[0]), len(r.cs[1]))
	}
	if n := w.Pending(); n != 0 {
		t.Fatalf("Pending = %d after their batch, want 0", n)
	}
}

func TestCloseCommitsWhatIsQueuedThenRefuses(t *testing.T) {
	// Close may be noticed before or after the queued op is taken (the
	// writer's select picks either): repeat, so that both ways are taken.
	for range 20 {
		r := newRecorder(true)
		w := New(Options{}, r.commit)
		first := submitAsync(w, context.Background(), 1)
		waitEntered(t, r)
		second := submitAsync(w, context.Background(), 2)
		eventually(t, "the second op waits", func() bool { return len(w.ops) == 1 })
		w.Complete(store.Completion{})
		closed := make(chan struct{})
		go func() { w.Close(); close(closed) }()
		eventually(t, "Close began", func() bool {
			select {
			case <-w.quit:
				return true
			default:
				return false
			}
		})
		close(r.gate)
		wantResult(t, first, "")
		wantResult(t, second, "")
		select {
		case <-closed:
		case <-time.After(waitLimit):
			t.Fatal("Close did not return")
		}
		r.mu.Lock()
		ops, cs := 0, 0
		for i := range r.batches {
			ops, cs = ops+len(r.batches[i]), cs+len(r.cs[i])
		}
		r.mu.Unlock()
		if ops != 2 || cs != 1 {
			t.Fatalf("%d ops and %d completions committed before Close returned, want 2 and 1", ops, cs)
		}
		if m := r.most.Load(); m != 1 {
			t.Fatalf("%d commits ran at once while closing, want one at a time", m)
		}
		if err := w.Submit(&Op[int]{Ctx: context.Background(), Work: 3}); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("Submit after Close = %v, want ErrClosed", err)
		}
		closeWithin(t, w) // a second Close returns
	}
}

func TestCloseWaitsForTheCommitOfACallerCommittingItself(t *testing.T) {
	r, w, first := holding(t, Options{}) // the lone caller commits itself
	closed := make(chan struct{})
	go func() { w.Close(); close(closed) }()
	// Give a Close that would not wait the time to return (this wait
	// cannot fail one that does).
	time.Sleep(20 * time.Millisecond)
	select {
	case <-closed:
		t.Fatal("Close returned while a commit was under way")
	default:
	}
	close(r.gate)
	wantResult(t, first, "")
	select {
	case <-closed:
	case <-time.After(waitLimit):
		t.Fatal("Close did not return")
	}
}

func TestSubmitGivesUpWhenItsContextEndsBeforeTheWriterTakesIt(t *testing.T) {
	r, w, first := holding(t, Options{MaxGroup: 1}) // the queue holds one op
	defer close(r.gate)
	second := submitAsync(w, context.Background(), 2)
	eventually(t, "the queue is full", func() bool { return len(w.ops) == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	third := submitAsync(w, ctx, 3)
	cancel()
	wantResult(t, third, context.Canceled.Error())
	r.gate <- struct{}{}
	wantResult(t, first, "")
	waitEntered(t, r)
	r.gate <- struct{}{}
	wantResult(t, second, "")
	for _, b := range r.snapshot() {
		for _, v := range b {
			if v == 3 {
				t.Fatalf("batches %v: the op that gave up was committed", r.snapshot())
			}
		}
	}
}

func TestOneSlotCommitsOneBatchAtATimeAndMoreSlotsOverlap(t *testing.T) {
	for _, slots := range []int{1, 3} {
		t.Run(fmt.Sprint("slots=", slots), func(t *testing.T) {
			r := newRecorder(true)
			w := New(Options{Slots: slots}, r.commit)
			var results []<-chan error
			for i := range slots {
				results = append(results, submitAsync(w, context.Background(), i))
				waitEntered(t, r) // each starts a batch of its own while the others hold theirs
			}
			// Two more wait while every slot is busy.
			extra := []<-chan error{submitAsync(w, context.Background(), 98), submitAsync(w, context.Background(), 99)}
			eventually(t, "the extra ops wait", func() bool { return len(w.ops) == 2 })
			close(r.gate)
			for _, ch := range append(results, extra...) {
				wantResult(t, ch, "")
			}
			closeWithin(t, w)
			if m := r.most.Load(); m != int32(slots) {
				t.Fatalf("at most %d commits ran at once, want %d", m, slots)
			}
		})
	}
}

func TestGatherWaitsForTheCallersOfTheLastBatch(t *testing.T) {
	// One op commits while two more queue behind it: three callers at the
	// end of that batch.
	r, w, a := holding(t, Options{Gather: time.Hour})
	b, c := submitAsync(w, context.Background(), 2), submitAsync(w, context.Background(), 3)
	eventually(t, "two ops wait", func() bool { return len(w.ops) == 2 })
	close(r.gate)
	wantResult(t, a, "")
	// With two of the three callers there, the writer holds them for the
	// third. (Were it not to wait, it would commit the two now: give it
	// the time to. This wait cannot fail a writer that does wait.)
	time.Sleep(50 * time.Millisecond)
	d := submitAsync(w, context.Background(), 4)
	for _, ch := range []<-chan error{b, c, d} {
		wantResult(t, ch, "")
	}
	got := r.snapshot()
	if len(got) != 2 || len(got[1]) != 3 {
		t.Fatalf("batches %v, want [[1] [2 3 4]]", got)
	}
}

func TestNotifyReportsTheBatchErrorOrEachResult(t *testing.T) {
	var got []error
	cs := []store.Completion{{Notify: func(err error) { got = append(got, err) }}, {}, {Notify: func(err error) { got = append(got, err) }}}
	Notify(cs, []error{nil, nil, store.ErrLeaseLost}, nil)
	if len(got) != 2 || got[0] != nil || !errors.Is(got[1], store.ErrLeaseLost) {
		t.Fatalf("results notified as %v, want [nil ErrLeaseLost]", got)
	}
	got = nil
	boom := errors.New("boom")
	Notify(cs, nil, boom)
	if len(got) != 2 || got[0] != boom || got[1] != boom {
		t.Fatalf("a failed batch notified %v, want boom twice", got)
	}
}

// goid is the current goroutine's number, read from its stack header.
func goid() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := strings.Fields(string(buf))
	return f[1] // "goroutine N [running]:"
}

func TestALoneCallerOnAnIdleWriterCommitsOnItsOwnGoroutine(t *testing.T) {
	me := goid()
	r := newRecorder(false)
	w := New(Options{}, r.commit)
	defer closeWithin(t, w)
	require.NoError(t, w.Submit(&Op[int]{Ctx: context.Background(), Work: 1}))
	require.Equal(t, []string{me}, r.goroutines(), "the idle writer's lone caller commits itself")

	// A batch of three callers: the next op is left to the writer, which
	// may wait for the other two.
	r3, w3, first := holding(t, Options{})
	rest := []<-chan error{submitAsync(w3, context.Background(), 2), submitAsync(w3, context.Background(), 3)}
	eventually(t, "two ops wait", func() bool { return len(w3.ops) == 2 })
	close(r3.gate)
	for _, ch := range append(rest, first) {
		wantResult(t, ch, "")
	}
	require.NoError(t, w3.Submit(&Op[int]{Ctx: context.Background(), Work: 4}))
	g := r3.goroutines()
	require.Len(t, g, 3)
	require.NotEqual(t, me, g[2], "after a batch of several callers, the writer's goroutine commits")

	r2 := newRecorder(false)
	w2 := New(Options{Slots: 2}, r2.commit)
	defer closeWithin(t, w2)
	require.NoError(t, w2.Submit(&Op[int]{Ctx: context.Background(), Work: 1}))
	require.NotEqual(t, []string{me}, r2.goroutines(), "with more than one slot the writer's goroutines commit")
}
