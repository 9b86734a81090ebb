//go:build darwin || freebsd

package sqlite

import "syscall"

// networkFSOf names the network file system path is on, from statfs's
// f_fstypename, or returns "" (also when statfs fails).
func networkFSOf(path string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return ""
	}
	b := make([]byte, 0, len(st.Fstypename))
	for _, c := range st.Fstypename {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return networkFSByName(string(b))
}
