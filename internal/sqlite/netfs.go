package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrNetworkFileSystem is Open's and New's refusal of a queue file on a
// network file system (NFS, SMB/CIFS, AFS, …): SQLite's WAL mode, which the
// queue uses, needs the shared memory and the POSIX locks of one machine's
// kernel, which a network file system does not give, so such a file would
// be corrupted or stay locked. The fix is to keep the queue file on a local
// disk (and, to share jobs between machines, to use the PostgreSQL backend).
var ErrNetworkFileSystem = errors.New("litequeue: the queue file is on a network file system, where SQLite's WAL mode does not work")

// networkFSByMagic names the network file system of a Linux statfs f_type
// (the magic numbers of linux/magic.h and the file systems' own headers), or
// returns "" for any other.
func networkFSByMagic(magic uint32) string {
	switch magic {
	case 0x6969:
		return "NFS"
	case 0x517B:
		return "SMB"
	case 0xFF534D42:
		return "CIFS"
	case 0xFE534D42:
		return "SMB2"
	case 0x5346414F, 0x6B414653:
		return "AFS"
	case 0x73757245:
		return "Coda"
	case 0x01021997:
		return "9P"
	case 0x00C36400:
		return "Ceph"
	case 0x0BD00BD0:
		return "Lustre"
	case 0x47504653:
		return "GPFS"
	}
	return ""
}

// networkFSByName names the network file system of a BSD or macOS statfs
// f_fstypename, or returns "" for any other.
func networkFSByName(fstype string) string {
	switch fstype {
	case "nfs":
		return "NFS"
	case "smbfs":
		return "SMB"
	case "afpfs":
		return "AFP"
	case "webdav":
		return "WebDAV"
	case "afs":
		return "AFS"
	}
	return ""
}

// checkLocalFS refuses, with ErrNetworkFileSystem, a queue file (or, for a
// file not yet made, its directory) on a network file system. Read-only
// opens pass: they inspect a file no process of this machine writes. A
// path whose file system cannot be told (an error, an OS without a cheap
// way to ask) passes too.
func checkLocalFS(name string, readOnly bool) error {
	if readOnly {
		return nil
	}
	at := name
	if _, err := os.Stat(name); errors.Is(err, fs.ErrNotExist) {
		at = filepath.Dir(name)
	}
	if kind := networkFSOf(at); kind != "" {
		return errorForNetworkFS(name, kind)
	}
	return nil
}

// errorForNetworkFS is the refusal of the queue file name on the network
// file system kind.
func errorForNetworkFS(name, kind string) error {
	return fmt.Errorf("%w: %s is on %s, which cannot share SQLite's WAL index and locks between processes, so the file would be corrupted or stay locked; put the queue file on a local disk (to share jobs between machines, use the PostgreSQL backend)",
		ErrNetworkFileSystem, name, kind)
}

// checkConnFS is checkLocalFS for the main database file of the
// application's connection (New). An in-memory or temporary database passes.
func checkConnFS(ctx context.Context, conn Execer) error {
	rows, err := conn.QueryContext(ctx, "PRAGMA database_list")
	if err != nil {
		return nil
	}
	defer rows.Close()
	for rows.Next() {
		var seq int
		var name, file string
		if rows.Scan(&seq, &name, &file) == nil && name == "main" && file != "" {
			return checkLocalFS(file, false)
		}
	}
	return nil
}
