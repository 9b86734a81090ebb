package main

import (
	"sort"
	"strings"
)

// Suggestions for a mistyped name: the known names a few edits away.

// suggest returns the candidates within a small edit distance of word, or
// that word is a prefix of, closest first.
func suggest(word string, candidates []string) []string {
	type scored struct {
		name string
		d    int
	}
	var found []scored
	for _, c := range candidates {
		d := editDistance(strings.ToLower(word), c)
		if d <= max(1, len(c)/3) || (len(word) >= 2 && strings.HasPrefix(c, word)) {
			found = append(found, scored{c, d})
		}
	}
	sort.SliceStable(found, func(i, j int) bool { return found[i].d < found[j].d })
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = f.name
	}
	return out
}

// editDistance is the edit distance between a and b counting an insertion,
// a deletion, a substitution and a swap of two neighbours ("meida" for
// "media") as one edit each (optimal string alignment).
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
