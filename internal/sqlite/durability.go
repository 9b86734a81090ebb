package sqlite

import "strings"

// syncPragmas returns the connection pragmas that give commits the
// durability synchronous (FULL or NORMAL) names on an OS goos, in the
// driver's _pragma syntax. On Apple systems fsync does not flush the
// drive's own cache, so a commit acknowledged under FULL could still be
// lost, or the file damaged, by a power cut: there FULL also sets
// fullfsync (every sync is an F_FULLFSYNC), and both levels set
// checkpoint_fullfsync (the checkpoint's syncs are, so what a checkpoint
// copied into the file and the WAL it then reuses reach the medium in
// order). Options.Pragmas of the same names win, as for every pragma.
func syncPragmas(goos, synchronous string) []string {
	ps := []string{"synchronous(" + synchronous + ")"}
	if goos == "darwin" || goos == "ios" {
		if synchronous == "FULL" {
			ps = append(ps, "fullfsync(1)")
		}
		ps = append(ps, "checkpoint_fullfsync(1)")
	}
	return ps
}

// pragmaStatements turns _pragma values such as "fullfsync(1)" into
// statements ("PRAGMA fullfsync = 1").
func pragmaStatements(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		name, val, _ := strings.Cut(p, "(")
		out[i] = "PRAGMA " + name + " = " + strings.TrimSuffix(val, ")")
	}
	return out
}
