package litequeue

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/litequeue/litequeue/internal/fuseproc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// faultFS is a FUSE file system that passes everything through to a real
// directory, except that while failWrite (failSync) is set every write
// (fsync) of a file fails with EIO and changes nothing: a failing device,
// as the queue's process sees it through the kernel.
type faultFS struct {
	failWrite, failSync atomic.Bool
	writeErrs, syncErrs atomic.Int64
}

type faultNode struct {
	*fs.LoopbackNode
	f *faultFS
}

var (
	_ fs.NodeWrapChilder = (*faultNode)(nil)
	_ fs.NodeWriter      = (*faultNode)(nil)
	_ fs.NodeWritever    = (*faultNode)(nil)
	_ fs.NodeFsyncer     = (*faultNode)(nil)
	_ fs.NodeOnAdder     = (*faultNode)(nil)
	_ fs.InodeEmbedder   = (*faultNode)(nil)
)

// noPassthrough hides the loopback file's backing descriptor: with it, a
// recent kernel does the file's reads and writes itself (FUSE passthrough)
// and they would never reach Write.
type noPassthrough struct{ *fs.LoopbackFile }

func (noPassthrough) PassthroughFd() (int, bool) { return -1, false }

func wrapFile(fh fs.FileHandle) fs.FileHandle {
	if lf, ok := fh.(*fs.LoopbackFile); ok {
		return noPassthrough{lf}
	}
	return fh
}

func (n *faultNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	return wrapFile(fh), fl, errno
}

func (n *faultNode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	in, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	return in, wrapFile(fh), fl, errno
}

// OnAdd is required by embedding LoopbackNode.
func (n *faultNode) OnAdd(ctx context.Context) {}

// WrapChild makes every node below the root a faultNode of the same faultFS.
func (n *faultNode) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &faultNode{LoopbackNode: ops.(*fs.LoopbackNode), f: n.f}
}

func (n *faultNode) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if n.f.failWrite.Load() {
		n.f.writeErrs.Add(1)
		return 0, syscall.EIO
	}
	return fh.(fs.FileWriter).Write(ctx, data, off)
}

func (n *faultNode) Writev(ctx context.Context, fh fs.FileHandle, data [][]byte, off int64) (uint32, syscall.Errno) {
	return n.Write(ctx, fh, bytes.Join(data, nil), off)
}

func (n *faultNode) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	if n.f.failSync.Load() {
		n.f.syncErrs.Add(1)
		return syscall.EIO
	}
	if s, ok := fh.(fs.FileFsyncer); ok {
		return s.Fsync(ctx, flags)
	}
	return 0
}

// faultFSMount is a faultFS over a real directory (the server's arg).
type faultFSMount struct {
	f      faultFS
	back   string
	server *fuse.Server
}

func (m *faultFSMount) Mount(mnt string) error {
	var st syscall.Stat_t
	if err := syscall.Stat(m.back, &st); err != nil {
		return err
	}
	root := &fs.LoopbackRoot{Path: m.back, Dev: uint64(st.Dev)}
	rootNode := &faultNode{LoopbackNode: &fs.LoopbackNode{RootData: root}, f: &m.f}
	root.RootNode = rootNode
	var err error
	m.server, err = fs.Mount(mnt, rootNode, &fs.Options{MountOptions: fuse.MountOptions{
		DirectMountStrict: true, FsName: "lqfault", Name: "lqfault",
	}})
	return err
}

// Command takes "write on", "write off", "fsync on", "fsync off" or
// "count", and answers each with "ok WRITEERRS FSYNCERRS".
func (m *faultFSMount) Command(c string) string {
	switch c {
	case "write on":
		m.f.failWrite.Store(true)
	case "write off":
		m.f.failWrite.Store(false)
	case "fsync on":
		m.f.failSync.Store(true)
	case "fsync off":
		m.f.failSync.Store(false)
	}
	return fmt.Sprint("ok ", m.f.writeErrs.Load(), " ", m.f.syncErrs.Load())
}

func (m *faultFSMount) Unmount() error { return m.server.Unmount() }

// TestFaultFSHelper is not a test: it is the body of the faultFS server
// process (see fuseproc.Serve).
func TestFaultFSHelper(t *testing.T) {
	fuseproc.Serve(t, func(back string) (fuseproc.FS, error) { return &faultFSMount{back: back}, nil })
}

// faultMount is a mounted faultFS served by another process.
type faultMount struct {
	*fuseproc.Mount
	t   *testing.T
	dir string
}

// command sends one command and returns the injected error counts so far.
func (m *faultMount) command(c string) (writeErrs, syncErrs int64) {
	m.t.Helper()
	m.SetT(m.t)
	answer := m.Command(c)
	_, err := fmt.Sscanf(answer, "ok %d %d", &writeErrs, &syncErrs)
	require.NoError(m.t, err, "faultFS server said %q", answer)
	return writeErrs, syncErrs
}

// mountFaultFS mounts a faultFS (served by another process) over a new
// directory. It skips the test when FUSE cannot be mounted here (no
// /dev/fuse, not root, or a kernel without FUSE), or fails it with
// LITEQUEUE_REQUIRE_FUSE=1.
func mountFaultFS(t *testing.T) *faultMount {
	t.Helper()
	m := fuseproc.Start(t, "TestFaultFSHelper", t.TempDir())
	return &faultMount{Mount: m, t: t, dir: m.Dir}
}

// TestIOErrorsFailCallsClearlyAndRecover runs a queue on a device that
// starts failing writes, then fsyncs: each enqueue fails with ErrStorageIO
// and writes nothing, workers keep the jobs they could not complete, and
// once the device works again everything goes on with no acknowledged job
// lost, also across a reopen.
func TestIOErrorsFailCallsClearlyAndRecover(t *testing.T) {
	m := mountFaultFS(t)
	dir := m.dir
	for _, fault := range []string{"write", "fsync"} {
		t.Run(fault, func(t *testing.T) {
			m.t = t
			set := func(on bool) int64 {
				w, s := m.command(fault + map[bool]string{true: " on", false: " off"}[on])
				return w + s
			}
			ev := newEvents()
			mock := clock.NewMock()
			// Retention longer than any time the test moves the clock through:
			// the completed count below must not shrink by clean-ups.
			var lostSuccesses atomic.Int64 // success writes that failed
			logs := errorLogHandler{fail: func(err error) {
				if strings.Contains(err.Error(), "writing a success failed") {
					lostSuccesses.Add(1)
				}
			}}
			opts := Options{Clock: mock, OnEvent: ev.add, PollInterval: -1, CompletedRetention: 10 * 365 * 24 * time.Hour,
				Logger: slog.New(logs)}
			path := filepath.Join(dir, fault+".db")
			q, err := Open(path, &opts)
			require.NoError(t, err)
			t.Cleanup(func() { _ = q.Close() }) // on failure, before the unmount
			ctx := context.Background()
			var acked []int64
			for range 50 {
				id, err := q.Enqueue(ctx, SendEmail{To: "before"}, nil)
				require.NoError(t, err)
				acked = append(acked, id)
			}

			set(true)
			_, err = q.Enqueue(ctx, SendEmail{To: "during"}, nil)
			require.ErrorIs(t, err, ErrStorageIO, "an enqueue on a failing device")
			_, err = q.EnqueueBatch(ctx, []BatchItem{{Job: SendEmail{To: "during"}}, {Job: SendEmail{To: "during"}}})
			require.ErrorIs(t, err, ErrStorageIO, "a batch enqueue on a failing device")
			require.Positive(t, set(false), "the device never failed")

			var ids []int64
			require.Eventually(t, func() bool {
				id, err := q.Enqueue(ctx, SendEmail{To: "after"}, nil)
				if err == nil {
					ids = append(ids, id)
				}
				return err == nil
			}, waitLimit, 10*time.Millisecond, "enqueues do not work again once the device works")
			acked = append(acked, ids...)

			// Workers run the jobs once the device works; then the device
			// fails while their successes are written, and recovers. The
			// first ten handlers hold until the fault is on, so their
			// successes always meet it. Runs are counted, never waited on.
			var runs atomic.Int64
			gate := make(chan struct{})
			Register(q, func(ctx context.Context, d *Delivery[SendEmail]) error {
				runs.Add(1)
				<-gate
				return nil
			})
			require.NoError(t, q.Start(ctx))
			require.Eventually(t, func() bool { return runs.Load() == DefaultConcurrency }, waitLimit, time.Millisecond,
				"the workers did not start")
			set(true)
			close(gate)
			require.Eventually(t, func() bool { return lostSuccesses.Load() > 0 }, waitLimit, time.Millisecond,
				"no success write met the fault")
			for range 10 {
				if _, err := q.Enqueue(ctx, SendEmail{To: "refused"}, nil); err == nil {
					t.Fatal("an enqueue succeeded on a failing device")
				}
			}
			set(false)
			for range 20 {
				id, err := q.Enqueue(ctx, SendEmail{To: "late"}, nil)
				require.NoError(t, err)
				acked = append(acked, id)
			}
			// Every acknowledged job succeeds in the end, each after one run:
			// a success whose commit met the fault was kept with its lease
			// and is written at the next claim or lease extension (the loop
			// moves the clock and nudges the queue).
			var last []QueueStats
			var lastErr error
			if !assert.Eventually(t, func() bool {
				last, lastErr = q.Stats(ctx)
				if lastErr != nil || len(last) != 1 {
					return false
				}
				if last[0].Completed == len(acked) {
					return true
				}
				mock.Add(DefaultVisibilityTimeout)
				q.Notify()
				return false
			}, waitLimit, 20*time.Millisecond, "not every acknowledged job completed after the fault cleared") {
				jobs, err := q.Jobs(ctx, JobFilter{})
				t.Logf("%d acknowledged, %d handler runs; last Stats %+v (err %v); Jobs err %v", len(acked), runs.Load(), last, lastErr, err)
				for _, j := range jobs {
					if j.State != StateCompleted {
						t.Logf("job %d: %s attempt %d visible %v (now %v) last error %q dead %q", j.ID, j.State, j.Attempt, j.VisibleAt, mock.Now(), j.LastError, j.DeadReason)
						for _, e := range ev.snapshot() {
							if e.JobID == j.ID {
								t.Logf("  %s attempt %d err %v", e.Type, e.Attempt, e.Err)
							}
						}
					}
				}
				t.FailNow()
			}
			stopCtx, cancel := context.WithTimeout(ctx, waitLimit)
			defer cancel()
			require.NoError(t, q.Stop(stopCtx))
			require.NoError(t, q.Close())

			got := jobIDs(t, path)
			require.Len(t, got, len(acked), "a failed enqueue left a job, or a job was lost")
			for _, id := range acked {
				require.True(t, got[id], "acknowledged job %d lost", id)
			}
			checkInvariants(t, path)
			require.Equal(t, int64(len(acked)), runs.Load(), "a job ran again: a success kept after its write failed must be written again, not run again")
			w, f := m.command("count")
			t.Logf("%d jobs, %d handler runs, %d success writes failed; %d write and %d fsync errors injected so far", len(acked), runs.Load(), lostSuccesses.Load(), w, f)
		})
	}
}
