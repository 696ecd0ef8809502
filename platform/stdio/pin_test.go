package stdio

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// write writes content to path (creating its directory) with mode.
func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// server is a stdio server as `node server.js --flag` is one: an
// executable on PATH, a script argument, a package directory.
type server struct {
	bin, script, pkg string
	args             []string
}

func newServer(t *testing.T) server {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	write(t, filepath.Join(bin, "interp"), "#!/bin/sh\nexit 0\n", 0o755)
	t.Setenv("PATH", bin)
	s := server{bin: filepath.Join(bin, "interp"), script: filepath.Join(dir, "server.js"), pkg: filepath.Join(dir, "pkg")}
	write(t, s.script, "console.log('v1')\n", 0o644)
	write(t, filepath.Join(s.pkg, "index.js"), "module.exports = 1\n", 0o644)
	write(t, filepath.Join(s.pkg, "lib", "util.js"), "exports.u = 1\n", 0o644)
	s.args = []string{s.script, "--flag", "-stdio"}
	return s
}

func (s server) identity(t *testing.T, h *Hasher) string {
	t.Helper()
	id, err := h.Identity("interp", s.args, s.pkg)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// rewrite replaces a file's content with content of the same size and puts
// its modification time back, as a careful attacker would: the change time
// still moves, and the digest with it.
func rewrite(t *testing.T, path, content string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(content)) != fi.Size() {
		t.Fatalf("rewrite %s: %d bytes, want %d", path, len(content), fi.Size())
	}
	write(t, path, content, fi.Mode().Perm())
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
}

// Issue 20.8: the identity changes when the executable, the script or a
// file of the pinned directory changes behind the same command line, and
// not when nothing changed; a cached digest is not served for a rewritten
// file even when its size and modification time were kept.
func TestIdentityPinsTheExecutableTheScriptAndThePinnedDirectory(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, s server)
	}{
		{"the executable", func(t *testing.T, s server) { rewrite(t, s.bin, "#!/bin/sh\nexit 1\n") }},
		{"the script", func(t *testing.T, s server) { rewrite(t, s.script, "console.log('v2')\n") }},
		{"a file of the pinned directory", func(t *testing.T, s server) {
			rewrite(t, filepath.Join(s.pkg, "lib", "util.js"), "exports.u = 2\n")
		}},
		{"a file added to the pinned directory", func(t *testing.T, s server) {
			write(t, filepath.Join(s.pkg, "lib", "extra.js"), "", 0o644)
		}},
		{"a file of the pinned directory made executable", func(t *testing.T, s server) {
			if err := os.Chmod(filepath.Join(s.pkg, "index.js"), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"the executable found on PATH", func(t *testing.T, s server) {
			other := filepath.Join(t.TempDir(), "interp")
			write(t, other, "#!/bin/sh\nexit 2\n", 0o755)
			t.Setenv("PATH", filepath.Dir(other)+string(os.PathListSeparator)+filepath.Dir(s.bin))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t)
			h := NewHasher()
			h.now = func() time.Time { return time.Now().Add(time.Minute) } // cache the files written just now
			before := s.identity(t, h)
			if again := s.identity(t, h); again != before {
				t.Fatalf("nothing changed, the identity did: %s, %s", before, again)
			}
			if fresh := s.identity(t, NewHasher()); fresh != before {
				t.Fatalf("a cold cache computes %s, the warm one %s", fresh, before)
			}
			time.Sleep(10 * time.Millisecond) // a change time the clock can tell apart
			c.change(t, s)
			after := s.identity(t, h)
			if after == before {
				t.Fatalf("%s changed and the identity did not", c.name)
			}
			if fresh := s.identity(t, NewHasher()); fresh != after {
				t.Fatalf("after the change a cold cache computes %s, the warm one %s", fresh, after)
			}
		})
	}
}

// The cost of a check: once hashed, an unchanged server is answered from
// stats alone; a change re-reads only the file that changed.
func TestIdentityReadsOnlyChangedFiles(t *testing.T) {
	s := newServer(t)
	h := NewHasher()
	h.now = func() time.Time { return time.Now().Add(time.Minute) } // the files are no longer fresh
	s.identity(t, h)
	if h.hashed != 4 { // interp, server.js, index.js, lib/util.js
		t.Fatalf("first identity hashed %d files, want 4", h.hashed)
	}
	s.identity(t, h)
	if h.hashed != 4 {
		t.Fatalf("an unchanged server was hashed again (%d files)", h.hashed-4)
	}
	time.Sleep(10 * time.Millisecond)
	rewrite(t, s.script, "console.log('v2')\n")
	s.identity(t, h)
	if h.hashed != 5 {
		t.Fatalf("after one change %d files were hashed, want 1", h.hashed-4)
	}
}

// A file changed within the last two seconds is hashed on every check: a
// second same-size write in the same timestamp tick (the times and the
// inode unchanged) is still seen.
func TestIdentityRehashesRecentlyChangedFiles(t *testing.T) {
	s := newServer(t)
	h := NewHasher()
	before := s.identity(t, h)
	s.identity(t, h)
	if h.hashed != 8 {
		t.Fatalf("two checks of fresh files hashed %d files, want 8", h.hashed)
	}
	fi, err := os.Stat(s.script)
	if err != nil {
		t.Fatal(err)
	}
	rewrite(t, s.script, "console.log('v2')\n")
	fi2, err := os.Stat(s.script)
	if err != nil {
		t.Fatal(err)
	}
	if after := s.identity(t, h); after == before {
		t.Fatalf("a rewrite was missed (stat before %v, after %v)", fi.ModTime(), fi2.ModTime())
	}
}

// With TreeMaxAge, Identity reuses the directory's tree digest for that
// long; FreshIdentity walks it now.
func TestTreeMaxAgeBoundsHowLongADirectoryChangeGoesUnseen(t *testing.T) {
	s := newServer(t)
	h := NewHasher()
	h.TreeMaxAge = time.Hour
	before := s.identity(t, h)
	write(t, filepath.Join(s.pkg, "lib", "util.js"), "exports.u = 2\n", 0o644)
	if id := s.identity(t, h); id != before {
		t.Fatal("a tree walked less than TreeMaxAge ago was walked again")
	}
	fresh, err := h.FreshIdentity("interp", s.args, s.pkg)
	if err != nil || fresh == before {
		t.Fatalf("FreshIdentity did not see the change: %s %v", fresh, err)
	}
	h.TreeMaxAge = time.Nanosecond
	if id := s.identity(t, h); id != fresh {
		t.Fatalf("after TreeMaxAge the change is seen: %s, want %s", id, fresh)
	}
}

// The command line still counts: the same files under another argument
// list, or without the pinned directory, are other identities.
func TestIdentityCoversTheCommandLine(t *testing.T) {
	s := newServer(t)
	h := NewHasher()
	base := s.identity(t, h)
	other, err := h.Identity("interp", append(s.args, "-x"), s.pkg)
	if err != nil || other == base {
		t.Fatalf("another argument: %s %v", other, err)
	}
	noDir, err := h.Identity("interp", s.args, "")
	if err != nil || noDir == base {
		t.Fatalf("without the pinned directory: %s %v", noDir, err)
	}
	if !strings.HasPrefix(base, "sha256:") || CommandDigest("interp", s.args) == base {
		t.Fatalf("identity %s", base)
	}
}

// A server whose identity cannot be computed is refused, never pinned in
// part: an executable that is not on PATH, a link out of the pinned
// directory, a link that resolves nowhere.
func TestIdentityRefusesWhatItCannotPin(t *testing.T) {
	s := newServer(t)
	h := NewHasher()
	if _, err := h.Identity("no-such-program", nil, ""); !errors.Is(err, ErrUnpinnable) {
		t.Fatalf("missing executable: %v", err)
	}
	if _, err := h.Identity("interp", nil, filepath.Join(t.TempDir(), "missing")); !errors.Is(err, ErrUnpinnable) {
		t.Fatalf("missing directory: %v", err)
	}
	inside := filepath.Join(s.pkg, "lib", "alias.js")
	if err := os.Symlink("util.js", inside); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Identity("interp", s.args, s.pkg); err != nil {
		t.Fatalf("a link inside the directory: %v", err)
	}
	for name, target := range map[string]string{"escape.js": s.script, "up.js": "../../server.js", "dangling.js": "nowhere.js"} {
		t.Run(name, func(t *testing.T) {
			link := filepath.Join(s.pkg, "lib", name)
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(link)
			_, err := h.Identity("interp", s.args, s.pkg)
			if !errors.Is(err, ErrUnpinnable) || !strings.Contains(err.Error(), "does not resolve inside the directory") {
				t.Fatalf("link to %s: %v", target, err)
			}
		})
	}
}
