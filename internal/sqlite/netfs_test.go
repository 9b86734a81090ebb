package sqlite

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestNetworkFileSystemsAreToldByTheirStatfsType(t *testing.T) {
	for magic, want := range map[uint32]string{
		0x6969: "NFS", 0x517B: "SMB", 0xFF534D42: "CIFS", 0xFE534D42: "SMB2",
		0x5346414F: "AFS", 0x6B414653: "AFS", 0x73757245: "Coda", 0x01021997: "9P",
		0x00C36400: "Ceph", 0x0BD00BD0: "Lustre", 0x47504653: "GPFS",
		// Local ones: ext4, xfs, btrfs, tmpfs, overlayfs, FUSE (sshfs cannot
		// be told from a local FUSE file system, so FUSE passes).
		0xEF53: "", 0x58465342: "", 0x9123683E: "", 0x01021994: "", 0x794C7630: "", 0x65735546: "",
	} {
		if got := networkFSByMagic(magic); got != want {
			t.Errorf("networkFSByMagic(%#x) = %q, want %q", magic, got, want)
		}
	}
	for name, want := range map[string]string{
		"nfs": "NFS", "smbfs": "SMB", "afpfs": "AFP", "webdav": "WebDAV", "afs": "AFS",
		"apfs": "", "hfs": "", "ufs": "", "zfs": "", "msdos": "",
	} {
		if got := networkFSByName(name); got != want {
			t.Errorf("networkFSByName(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestLocalQueueFilesPassTheNetworkFileSystemCheck(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{filepath.Join(dir, "new.db"), dir} {
		if err := checkLocalFS(name, false); err != nil {
			t.Errorf("checkLocalFS(%s) on a local disk: %v", name, err)
		}
	}
}

func TestNetworkFileSystemErrorSaysWhatToDo(t *testing.T) {
	// The refusal's text, built as checkLocalFS builds it for a file on NFS.
	err := errorForNetworkFS("/mnt/share/q.db", networkFSByMagic(0x6969))
	if !errors.Is(err, ErrNetworkFileSystem) {
		t.Fatalf("%v is not ErrNetworkFileSystem", err)
	}
	for _, want := range []string{"/mnt/share/q.db", "NFS", "local disk", "PostgreSQL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}
