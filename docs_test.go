package litequeue_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestReadmeExampleIsExample checks that the README's first Go block is
// example_test.go's SendEmail type, its Kind method and the body of Example,
// character for character, so that the example a reader copies is one that
// compiles and runs.
func TestReadmeExampleIsExample(t *testing.T) {
	readme := readDoc(t, "README.md")
	start := strings.Index(readme, "```go\n")
	if start < 0 {
		t.Fatal("README.md has no ```go block")
	}
	block := readme[start+len("```go\n"):]
	block = block[:strings.Index(block, "```")]

	src := readDoc(t, "example_test.go")
	f, err := parser.ParseFile(token.NewFileSet(), "example_test.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	text := func(n ast.Node) string { return src[n.Pos()-1 : n.End()-1] }
	var typ, kind, body string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			if d.Tok == token.TYPE && d.Specs[0].(*ast.TypeSpec).Name.Name == "SendEmail" {
				typ = text(d)
			}
		case *ast.FuncDecl:
			switch {
			case d.Name.Name == "Kind" && d.Recv != nil && text(d.Recv.List[0].Type) == "SendEmail":
				kind = text(d)
			case d.Name.Name == "Example" && d.Recv == nil:
				inner := src[d.Body.Lbrace : d.Body.Rbrace-1]
				var lines []string
				for _, l := range strings.Split(strings.Trim(inner, "\n"), "\n") {
					lines = append(lines, strings.TrimPrefix(l, "\t"))
				}
				body = strings.Join(lines, "\n")
			}
		}
	}
	want := typ + "\n\n" + kind + "\n\n" + body + "\n"
	if block != want {
		t.Errorf("README.md's example differs from example_test.go (type SendEmail, its Kind method, the body of Example); make them the same.\nREADME:\n%s\nexample_test.go:\n%s", block, want)
	}
}

// pendingPages are pages that links may name before they exist: they are
// written on another branch. A page listed here that exists is checked like
// any other.
var pendingPages = map[string]bool{}

// TestDocsLinks checks the README, CONTRIBUTING.md and docs/*.md: every
// relative link names a file that exists (and, with #anchor, a heading of
// that page), and every test, example, benchmark or fuzz target named in
// `code` exists in the repository.
func TestDocsLinks(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{"README.md", "CONTRIBUTING.md"}, pages...)
	names, cases := testNames(t)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	code := regexp.MustCompile("`([^`\n]+)`")
	name := regexp.MustCompile(`^((?:Test|Example|Benchmark|Fuzz)[A-Za-z0-9_]*)(?:/([A-Za-z0-9_]+))?$`)
	for _, page := range pages {
		text := withoutFences(readDoc(t, page))
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			file := page
			if path != "" {
				file = filepath.Join(filepath.Dir(page), path)
			}
			if _, err := os.Stat(file); err != nil {
				if !pendingPages[filepath.ToSlash(file)] {
					t.Errorf("%s: link %s: %v", page, target, err)
				}
				continue
			}
			if anchor != "" && !headings(t, file)[anchor] {
				t.Errorf("%s: link %s: %s has no heading with anchor #%s", page, target, file, anchor)
			}
		}
		for _, m := range code.FindAllStringSubmatch(text, -1) {
			n := name.FindStringSubmatch(m[1])
			if n == nil {
				continue
			}
			if !names[n[1]] {
				t.Errorf("%s: %s names %s, which no _test.go file declares", page, m[1], n[1])
			} else if n[2] != "" && strings.HasPrefix(n[1], "TestConformance") && !cases[n[2]] {
				t.Errorf("%s: %s names the conformance test %s, which the conformance suite (conformance_*_test.go) does not have", page, m[1], n[2])
			}
		}
	}
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// withoutFences returns text without its fenced code blocks.
func withoutFences(text string) string {
	var out []string
	in := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "```") {
			in = !in
			continue
		}
		if !in {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// headings returns the anchors of a Markdown file's headings, made as GitHub
// makes them: lower case, punctuation dropped, spaces as hyphens, a -N
// suffix on repeats.
func headings(t *testing.T, file string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, l := range strings.Split(withoutFences(readDoc(t, file)), "\n") {
		title, ok := strings.CutPrefix(strings.TrimLeft(l, "#"), " ")
		if !ok || !strings.HasPrefix(l, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a += "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		anchors[a] = true
	}
	return anchors
}

// testNames returns the test, example, benchmark and fuzz functions of every
// _test.go file in the repository, and the names of the conformance suite's
// tests (run as TestConformance/NAME).
func testNames(t *testing.T) (names, cases map[string]bool) {
	names, cases = map[string]bool{}, map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Example|Benchmark|Fuzz)[A-Za-z0-9_]*)\(`)
	suite := regexp.MustCompile(`\{\s*"([A-Z][A-Za-z0-9]*)",\s*test`)
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		text := readDoc(t, path)
		for _, m := range decl.FindAllStringSubmatch(text, -1) {
			names[m[1]] = true
		}
		if strings.HasPrefix(filepath.Base(path), "conformance_") && filepath.Dir(path) == "." {
			for _, m := range suite.FindAllStringSubmatch(text, -1) {
				cases[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names, cases
}

// notCompiled are the Go samples of docs/ that are not taken from a test
// file, by their first line: outlines and one-liners that no Example holds.
var notCompiled = map[string]bool{
	"type RetryPolicy struct {": true, // docs/retries.md: the types' outline
	`q, err := litequeue.Open("app-queue.db", opts)                       // one machine`: true, // docs/postgres.md
}

// TestDocsGoSamplesComeFromTests checks that every Go sample of docs/ is an
// excerpt of a _test.go file (an Example, mostly): its lines, without
// indentation and blank lines, appear in that order and together in one of
// them, so that a sample cannot drift from code that compiles.
func TestDocsGoSamplesComeFromTests(t *testing.T) {
	var sources [][]string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, "_test.go") {
			sources = append(sources, codeLines(readDoc(t, path)))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	pages, _ := filepath.Glob("docs/*.md")
	for _, page := range pages {
		blocks := strings.Split(readDoc(t, page), "```go\n")
		for _, b := range blocks[1:] {
			sample := codeLines(b[:strings.Index(b, "```")])
			if len(sample) == 0 || notCompiled[sample[0]] {
				continue
			}
			found := false
			for _, src := range sources {
				for i := 0; i+len(sample) <= len(src) && !found; i++ {
					found = slices.Equal(src[i:i+len(sample)], sample)
				}
			}
			if !found {
				t.Errorf("%s: the Go sample starting %q is not an excerpt of any _test.go file; take it from an Example", page, sample[0])
			}
		}
	}
}

// codeLines returns the non-blank lines of text without their indentation.
func codeLines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
