package sqlite

import (
	"path/filepath"
	"strings"
)

// networkFSOf tells a UNC path (\\server\share\…), the cheap sign of a
// network share on Windows; a mapped drive letter is not detected.
func networkFSOf(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if strings.HasPrefix(path, `\\`) && !strings.HasPrefix(path, `\\?\`) && !strings.HasPrefix(path, `\\.\`) {
		return "a network share (UNC path)"
	}
	return ""
}
