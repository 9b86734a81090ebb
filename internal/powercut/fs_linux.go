package powercut

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is a flat in-memory file system (one directory of regular files) that
// knows what is durable. A write changes what processes read at once but
// becomes durable only when the file is fsynced (fsync or fdatasync, by any
// process); a file's creation, removal or renaming becomes durable only
// when the directory is fsynced. Cut forgets what was not durable.
//
// That is the contract SQLite writes against: it fsyncs the WAL (or the
// rollback journal) before it counts a commit done, the database file
// after a checkpoint, and the directory after creating a WAL or journal.
type FS struct {
	mu      sync.Mutex
	dir     map[string]*file // what processes see
	durable map[string]*file // the directory as of its last fsync
	nextIno uint64
	server  *fuse.Server
	mnt     string

	// IgnoreSync, when set, names files whose fsyncs do nothing (a device
	// or a build that drops them): the fault the tests must catch.
	ignoreSync string

	stats Stats
}

// Stats counts what the file system saw.
type Stats struct {
	Writes, Syncs, DirSyncs, IgnoredSyncs int64
	Cuts                                  int64
	LostWrites                            int64 // writes and truncations forgotten by cuts
	LostNames                             int64 // creations, removals and renames forgotten by cuts
	// LastSync is when each file (by name) was last fsynced, in Unix
	// nanoseconds of the wall clock: what was written to it before then
	// is durable.
	LastSync map[string]int64
}

// file is one regular file: its contents as processes see them, as of its
// last fsync, and the changes between the two, in order.
type file struct {
	ino     uint64
	name    string // its last name, for IgnoreSync and Stats
	data    []byte
	durable []byte
	pending []change
}

// change is one write (data at off) or truncation (to size) not yet synced.
type change struct {
	off   int64
	data  []byte
	trunc bool
}

func (c change) apply(b []byte) []byte {
	if c.trunc {
		if c.off <= int64(len(b)) {
			return b[:c.off]
		}
		return append(b, make([]byte, c.off-int64(len(b)))...)
	}
	end := c.off + int64(len(c.data))
	if end > int64(len(b)) {
		b = append(b, make([]byte, end-int64(len(b)))...)
	}
	copy(b[c.off:end], c.data)
	return b
}

// New returns an empty file system.
func New() *FS {
	return &FS{dir: map[string]*file{}, durable: map[string]*file{}, nextIno: 2,
		stats: Stats{LastSync: map[string]int64{}}}
}

// Mount mounts the file system on mnt.
func (f *FS) Mount(mnt string) error {
	sec := time.Second
	server, err := fs.Mount(mnt, &dirNode{fs: f}, &fs.Options{
		EntryTimeout: &sec, AttrTimeout: &sec,
		MountOptions: fuse.MountOptions{DirectMountStrict: true, FsName: "lqpowercut", Name: "lqpowercut"},
	})
	if err != nil {
		return err
	}
	f.server, f.mnt = server, mnt
	return nil
}

// Unmount unmounts it. Every process using it must have closed its files.
func (f *FS) Unmount() error {
	if f.server == nil {
		return nil
	}
	err := f.server.Unmount()
	f.server = nil
	return err
}

// IgnoreSyncs makes fsyncs of files whose name ends in suffix do nothing
// ("" for none).
func (f *FS) IgnoreSyncs(suffix string) {
	f.mu.Lock()
	f.ignoreSync = suffix
	f.mu.Unlock()
}

// Cut is a power cut and the reboot after it: the file system is
// unmounted (every process using it must be dead: a power cut kills them
// too, and closing their files flushes what the kernel held for them), every
// file goes back to what its last fsync made durable and the directory to
// what its last fsync did, and it is mounted again, with nothing cached in
// the kernel. With rng, each change not yet durable survives with
// probability 1/2 instead (a cache the kernel had partly written back, in
// any order), every name's change too.
func (f *FS) Cut(rng *rand.Rand) error {
	if err := f.Unmount(); err != nil {
		return fmt.Errorf("unmount before the cut: %w", err)
	}
	f.mu.Lock()
	names := map[string]bool{}
	for n := range f.dir {
		names[n] = true
	}
	for n := range f.durable {
		names[n] = true
	}
	dir := map[string]*file{}
	for n := range names {
		v, d := f.dir[n], f.durable[n]
		if v != d {
			f.stats.LostNames++
		}
		if v != d && rng != nil && rng.IntN(2) == 0 {
			d = v
		}
		if d != nil {
			dir[n] = d
		}
	}
	seen := map[*file]bool{}
	for _, fl := range slices.Collect(maps.Values(f.dir)) {
		seen[fl] = false
	}
	for _, fl := range dir {
		seen[fl] = true
	}
	for fl, kept := range seen {
		for _, c := range fl.pending {
			if kept && rng != nil && rng.IntN(2) == 0 {
				fl.durable = c.apply(fl.durable)
			} else {
				f.stats.LostWrites++
			}
		}
		fl.pending = nil
		fl.data = slices.Clone(fl.durable)
	}
	for n, fl := range dir {
		fl.name = n
	}
	f.dir, f.durable = dir, maps.Clone(dir)
	f.stats.Cuts++
	f.mu.Unlock()
	return f.Mount(f.mnt)
}

// Dump writes the durable files (as after a Cut) into dir, emptied first.
func (f *FS) Dump(dir string) error {
	old, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range old {
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for n, fl := range f.durable {
		if err := os.WriteFile(filepath.Join(dir, n), fl.durable, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Stats returns the counts so far.
func (f *FS) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.stats
	s.LastSync = maps.Clone(f.stats.LastSync)
	return s
}

// dirNode is the root, the only directory.
type dirNode struct {
	fs.Inode
	fs *FS
}

var (
	_ fs.NodeLookuper  = (*dirNode)(nil)
	_ fs.NodeCreater   = (*dirNode)(nil)
	_ fs.NodeUnlinker  = (*dirNode)(nil)
	_ fs.NodeRenamer   = (*dirNode)(nil)
	_ fs.NodeReaddirer = (*dirNode)(nil)
	_ fs.NodeGetattrer = (*dirNode)(nil)
	_ fs.NodeFsyncer   = (*dirNode)(nil)
)

func (d *dirNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o755
	out.Ino = 1
	out.Nlink = 2
	return 0
}

func (d *dirNode) node(ctx context.Context, fl *file, out *fuse.EntryOut) *fs.Inode {
	fl.attr(&out.Attr)
	return d.NewInode(ctx, &fileNode{fs: d.fs, f: fl}, fs.StableAttr{Mode: syscall.S_IFREG, Ino: fl.ino})
}

func (d *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	fl := d.fs.dir[name]
	if fl == nil {
		return nil, syscall.ENOENT
	}
	return d.node(ctx, fl, out), 0
}

func (d *dirNode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	fl := d.fs.dir[name]
	if fl == nil {
		fl = &file{ino: d.fs.nextIno, name: name}
		d.fs.nextIno++
		d.fs.dir[name] = fl
	} else if flags&syscall.O_EXCL != 0 {
		return nil, nil, 0, syscall.EEXIST
	}
	if flags&syscall.O_TRUNC != 0 && len(fl.data) > 0 {
		fl.change(change{trunc: true})
	}
	return d.node(ctx, fl, out), nil, fuse.FOPEN_KEEP_CACHE, 0
}

func (d *dirNode) Unlink(ctx context.Context, name string) syscall.Errno {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	if d.fs.dir[name] == nil {
		return syscall.ENOENT
	}
	delete(d.fs.dir, name)
	return 0
}

func (d *dirNode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if flags != 0 {
		return syscall.EINVAL
	}
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	fl := d.fs.dir[name]
	if fl == nil {
		return syscall.ENOENT
	}
	delete(d.fs.dir, name)
	d.fs.dir[newName] = fl
	fl.name = newName
	return 0
}

func (d *dirNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	var es []fuse.DirEntry
	for _, n := range slices.Sorted(maps.Keys(d.fs.dir)) {
		es = append(es, fuse.DirEntry{Name: n, Mode: syscall.S_IFREG, Ino: d.fs.dir[n].ino})
	}
	return fs.NewListDirStream(es), 0
}

// Fsync of the directory makes its entries durable.
func (d *dirNode) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	d.fs.durable = maps.Clone(d.fs.dir)
	d.fs.stats.DirSyncs++
	return 0
}

// fileNode is a regular file.
type fileNode struct {
	fs.Inode
	fs *FS
	f  *file
}

var (
	_ fs.NodeOpener    = (*fileNode)(nil)
	_ fs.NodeReader    = (*fileNode)(nil)
	_ fs.NodeWriter    = (*fileNode)(nil)
	_ fs.NodeGetattrer = (*fileNode)(nil)
	_ fs.NodeSetattrer = (*fileNode)(nil)
	_ fs.NodeFsyncer   = (*fileNode)(nil)
	_ fs.NodeFlusher   = (*fileNode)(nil)
)

func (fl *file) attr(a *fuse.Attr) {
	a.Mode = syscall.S_IFREG | 0o644
	a.Ino = fl.ino
	a.Nlink = 1
	a.Size = uint64(len(fl.data))
	a.Blocks = (a.Size + 511) / 512
	a.Blksize = 4096
}

// change applies c to what processes see and keeps it until a sync.
func (fl *file) change(c change) {
	fl.data = c.apply(fl.data)
	fl.pending = append(fl.pending, c)
}

func (n *fileNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_TRUNC != 0 {
		n.fs.mu.Lock()
		n.f.change(change{trunc: true})
		n.fs.mu.Unlock()
	}
	return nil, fuse.FOPEN_KEEP_CACHE, 0
}

func (n *fileNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	n.f.attr(&out.Attr)
	return 0
}

func (n *fileNode) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if sz, ok := in.GetSize(); ok && sz != uint64(len(n.f.data)) {
		n.f.change(change{off: int64(sz), trunc: true})
		n.fs.stats.Writes++
	}
	n.f.attr(&out.Attr)
	return 0
}

func (n *fileNode) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if off >= int64(len(n.f.data)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), int64(len(n.f.data)))
	return fuse.ReadResultData(slices.Clone(n.f.data[off:end])), 0
}

func (n *fileNode) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	n.f.change(change{off: off, data: slices.Clone(data)})
	n.fs.stats.Writes++
	return uint32(len(data)), 0
}

func (n *fileNode) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno { return 0 }

// Fsync makes the file's contents durable (fsync and fdatasync alike).
func (n *fileNode) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if n.fs.ignoreSync != "" && strings.HasSuffix(n.f.name, n.fs.ignoreSync) {
		n.fs.stats.IgnoredSyncs++
		return 0
	}
	for _, c := range n.f.pending {
		n.f.durable = c.apply(n.f.durable)
	}
	n.f.pending = nil
	n.fs.stats.Syncs++
	n.fs.stats.LastSync[n.f.name] = time.Now().UnixNano()
	return 0
}
