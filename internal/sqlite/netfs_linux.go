package sqlite

import "syscall"

// networkFSOf names the network file system path is on, from statfs's
// f_type, or returns "" (also when statfs fails).
func networkFSOf(path string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return ""
	}
	return networkFSByMagic(uint32(st.Type)) //nolint:gosec // f_type is a 32-bit magic number on every architecture
}
