package sqlite

import (
	"net/url"
	"runtime"
	"slices"
	"testing"
)

// TestDarwinCommitsSyncTheDriveCache checks the pragmas each OS gets: on
// macOS (and iOS) fsync leaves the drive's cache unflushed, so FULL needs
// fullfsync and both levels checkpoint_fullfsync; elsewhere synchronous
// alone. The pragma list is a function of GOOS so that this runs on Linux.
func TestDarwinCommitsSyncTheDriveCache(t *testing.T) {
	for _, tc := range []struct {
		goos, sync string
		want       []string
	}{
		{"darwin", "FULL", []string{"synchronous(FULL)", "fullfsync(1)", "checkpoint_fullfsync(1)"}},
		{"ios", "FULL", []string{"synchronous(FULL)", "fullfsync(1)", "checkpoint_fullfsync(1)"}},
		{"darwin", "NORMAL", []string{"synchronous(NORMAL)", "checkpoint_fullfsync(1)"}},
		{"linux", "FULL", []string{"synchronous(FULL)"}},
		{"linux", "NORMAL", []string{"synchronous(NORMAL)"}},
		{"windows", "FULL", []string{"synchronous(FULL)"}},
	} {
		if got := syncPragmas(tc.goos, tc.sync); !slices.Equal(got, tc.want) {
			t.Errorf("syncPragmas(%s, %s) = %q, want %q", tc.goos, tc.sync, got, tc.want)
		}
	}
	got := pragmaStatements([]string{"synchronous(FULL)", "fullfsync(1)"})
	if want := []string{"PRAGMA synchronous = FULL", "PRAGMA fullfsync = 1"}; !slices.Equal(got, want) {
		t.Errorf("pragmaStatements = %q, want %q", got, want)
	}
}

// TestDSNCarriesThisOSSyncPragmas checks that the queue file's connections
// get syncPragmas of the OS they run on, and that Options.Pragmas of the
// same name win.
func TestDSNCarriesThisOSSyncPragmas(t *testing.T) {
	pragmas := func(o Options) []string {
		u, err := url.Parse(dsn("/tmp/q.db", &o, false))
		if err != nil {
			t.Fatal(err)
		}
		return u.Query()["_pragma"]
	}
	for _, sync := range []string{"FULL", "NORMAL"} {
		got := pragmas(Options{Synchronous: sync})
		for _, want := range syncPragmas(runtime.GOOS, sync) {
			if !slices.Contains(got, want) {
				t.Errorf("DSN pragmas %q lack %s", got, want)
			}
		}
	}
	got := pragmas(Options{Synchronous: "FULL", Pragmas: []string{"synchronous(OFF)", "checkpoint_fullfsync(0)"}})
	if slices.Contains(got, "synchronous(FULL)") || slices.Contains(got, "checkpoint_fullfsync(1)") {
		t.Errorf("Options.Pragmas did not win: %q", got)
	}
}
