package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The curated list must match the source it mutates: after a refactor this
// test names every mutant whose snippet moved, so the list is kept up to date.
func TestMutantListMatchesTheSource(t *testing.T) {
	f, err := os.Open("mutants.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ms, err := parse(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		t.Fatal("mutants.txt lists no mutant")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if err := check(root, ms); err != nil {
		t.Fatalf("internal/mutate/mutants.txt is out of date with the source; update the snippets:\n%v", err)
	}
}

func TestParseReadsEditsVerbatim(t *testing.T) {
	ms, err := parse(strings.NewReader("# comment\nmutant: m\nguarantee: g\ntests: ^TestX$\n<<<< a.go\n\tif x {\n====\n\tif !x {\n>>>>\n<<<< b.go\n\n  keep  \n====\n>>>>\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || len(ms[0].edits) != 2 || ms[0].pkg != "." {
		t.Fatalf("got %+v", ms)
	}
	if e := ms[0].edits[0]; e.file != "a.go" || e.old != "\tif x {" || e.new != "\tif !x {" {
		t.Fatalf("edit 0: %+v", e)
	}
	if e := ms[0].edits[1]; e.old != "\n  keep  " || e.new != "" {
		t.Fatalf("edit 1: %q -> %q", e.old, e.new)
	}
}

func TestParseRejectsBrokenLists(t *testing.T) {
	for name, list := range map[string]string{
		"unclosed edit":   "mutant: m\nguarantee: g\ntests: x\n<<<< a.go\nfoo\n====\nbar\n",
		"no tests":        "mutant: m\nguarantee: g\n<<<< a.go\nfoo\n====\nbar\n>>>>\n",
		"no guarantee":    "mutant: m\ntests: x\n<<<< a.go\nfoo\n====\nbar\n>>>>\n",
		"no edit":         "mutant: m\nguarantee: g\ntests: x\n",
		"same text":       "mutant: m\nguarantee: g\ntests: x\n<<<< a.go\nfoo\n====\nfoo\n>>>>\n",
		"twice":           "mutant: m\nguarantee: g\ntests: x\n<<<< a.go\nfoo\n====\nbar\n>>>>\nmutant: m\nguarantee: g\ntests: x\n<<<< a.go\nfoo\n====\nbar\n>>>>\n",
		"unknown keyword": "mutant: m\nguarantees: g\n",
		"bad pattern":     "mutant: m\nguarantee: g\ntests: (\n<<<< a.go\nfoo\n====\nbar\n>>>>\n",
	} {
		if _, err := parse(strings.NewReader(list)); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}
