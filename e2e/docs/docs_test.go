// Package docs_test checks the repository's documentation as a reader meets
// it: a README that stays a front door, links that resolve inside the
// repository, and nothing that points outside it.
package docs_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository root, seen from e2e/docs.
const root = "../.."

// maxReadmeLines keeps the README a front door; the reference lives in docs/.
const maxReadmeLines = 200

// skipDir lists directories that hold no documentation of ours.
func skipDir(name string) bool {
	switch name {
	case ".git", "node_modules", ".toolcrib", "drill-out", "bin":
		return true
	}
	return false
}

// markdown returns every .md file of the repository, relative to root.
func markdown(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && skipDir(d.Name()) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(root, path)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestReadmeIsAFrontDoor(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxReadmeLines {
		t.Fatalf("README.md has %d lines, at most %d: move reference material into docs/", n, maxReadmeLines)
	}
	for _, want := range []string{"make run", "make test", "## A first tour", "docs/design.md"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("README.md does not mention %q", want)
		}
	}
}

// The repository explains itself: no file names a folder beside the
// checkout (the string is built so this file does not name it either).
func TestNothingReferencesAFolderOutsideTheRepository(t *testing.T) {
	outside := ".." + "/shared"
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Size() > 4<<20 {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), outside) {
			t.Errorf("%s refers to %s", path, outside)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

var (
	linkRe    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRe = regexp.MustCompile(`^#{1,6} (.*)$`)
	schemeRe  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	slugDrop  = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
)

// lines returns a markdown file's lines outside fenced code blocks.
func lines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	fence := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "```") {
			fence = !fence
			continue
		}
		if !fence {
			out = append(out, l)
		}
	}
	return out
}

// slug is the anchor a heading gets when the markdown is rendered.
func slug(heading string) string {
	s := strings.ToLower(strings.TrimSpace(heading))
	return strings.ReplaceAll(slugDrop.ReplaceAllString(s, ""), " ", "-")
}

func anchors(t *testing.T, path string) map[string]bool {
	out := map[string]bool{}
	for _, l := range lines(t, path) {
		if m := headingRe.FindStringSubmatch(l); m != nil {
			out[slug(m[1])] = true
		}
	}
	return out
}

// Every link in the documentation resolves to a file (and heading) of the
// repository; none leaves it.
func TestLinksStayInsideTheRepositoryAndResolve(t *testing.T) {
	files := markdown(t)
	if len(files) < 10 {
		t.Fatalf("found only %d markdown files: %v", len(files), files)
	}
	for _, f := range files {
		for _, l := range lines(t, filepath.Join(root, f)) {
			for _, m := range linkRe.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if schemeRe.MatchString(target) {
					t.Errorf("%s: link outside the repository: %s", f, target)
					continue
				}
				path, frag, _ := strings.Cut(target, "#")
				resolved := filepath.Join(root, f)
				if path != "" {
					resolved = filepath.Join(root, filepath.Dir(f), path)
				}
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s: link to a missing file: %s", f, target)
					continue
				}
				if frag != "" && strings.HasSuffix(resolved, ".md") && !anchors(t, resolved)[frag] {
					t.Errorf("%s: link to a missing heading: %s", f, target)
				}
			}
		}
	}
}
