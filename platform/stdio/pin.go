package stdio

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/toolcrib/toolcrib/platform/canonical"
)

// Bounds of what [Hasher.Identity] reads. A larger file or tree is refused
// ([ErrUnpinnable]), never pinned in part.
const (
	// MaxFileBytes is the largest executable or argument file hashed.
	MaxFileBytes = 1 << 30
	// MaxDirEntries is the most entries (files, directories, links) of a
	// pinned directory.
	MaxDirEntries = 50_000
	// MaxDirBytes is the most bytes of the regular files of a pinned
	// directory, together.
	MaxDirBytes = 1 << 30
	// MaxDirDepth is the deepest nesting below a pinned directory.
	MaxDirDepth = 64
	// maxCached bounds the digest cache; past it the cache starts over.
	maxCached = 200_000
	// racyWindow: a file changed less than this before it was hashed is not
	// cached (hashed again on every check). File system timestamps are
	// coarse (a clock tick, up to seconds on some file systems), so a
	// second write within the same tick as the one hashed would leave size,
	// times and inode unchanged: git's "racily clean" entries, solved the
	// same way.
	racyWindow = 2 * time.Second
)

// ErrUnpinnable is wrapped by every [Hasher.Identity] error: the
// executable cannot be resolved or read, or a pinned directory breaks a
// bound or holds a symbolic link leading out of it. A server whose identity
// cannot be computed is neither scanned nor started.
var ErrUnpinnable = errors.New("stdio: the server's identity cannot be computed")

// Hasher computes stdio servers' identities ([Hasher.Identity]), caching
// each file's sha256 under its path, device, inode, size, modification and
// change time: a file is read again only when one of those changed, so a
// check on every call costs a stat per file, not a hash. (The change time
// cannot be set back by a user, so restoring an old modification time
// does not hide a rewrite; a file changed in the last two seconds is not
// cached at all, since a second write within the same timestamp tick would
// not move its times.) Safe for concurrent use; the zero value is ready.
type Hasher struct {
	// TreeMaxAge is how long [Hasher.Identity] reuses a pinned directory's
	// tree digest after walking it (a walk costs a stat per entry: tens of
	// milliseconds for a large package); zero walks on every call.
	// [Hasher.FreshIdentity] always walks.
	TreeMaxAge time.Duration

	mu     sync.Mutex
	trees  map[string]walked
	files  map[string]cached
	hashed int              // files read and hashed (not answered from the cache), for tests
	now    func() time.Time // nil: time.Now; tests move it
}

type walked struct {
	tree string
	at   time.Time
}

type cached struct {
	key    fileKey
	digest string
}

// NewHasher returns an empty [Hasher].
func NewHasher() *Hasher { return &Hasher{} }

// Identity returns a stdio server's identity: `sha256:<hex>` of the
// canonical JSON of
//
//   - `command`: [command, args...] (the command line, [CommandDigest]'s
//     input);
//   - `executable`: the sha256 of the file command resolves to, looked up on
//     PATH as [exec.Command] resolves it for the process;
//   - `files`: for every argument naming an existing regular file (the
//     script an interpreter runs), its index and the file's sha256;
//   - `pin_dir` (when pinDir is not empty): the directory and the digest of
//     its tree ([Hasher.TreeDigest]).
//
// So a program replaced behind the same command line (a rewritten script,
// a swapped binary, an updated package in pinDir) is another identity.
// Relative paths resolve against the working directory, as the started
// process's would. What is not pinned: files a program opens by a name that
// is not an argument (outside pinDir), shared libraries, the interpreter's
// own modules, and a change between this check and the process start.
//
// The pinned directory's tree digest may be up to [Hasher.TreeMaxAge] old;
// [Hasher.FreshIdentity] walks it now.
func (h *Hasher) Identity(command string, args []string, pinDir string) (string, error) {
	return h.identity(command, args, pinDir, h.TreeMaxAge)
}

// FreshIdentity is [Hasher.Identity] with the pinned directory walked now,
// whatever [Hasher.TreeMaxAge] says (right before a process is started).
func (h *Hasher) FreshIdentity(command string, args []string, pinDir string) (string, error) {
	return h.identity(command, args, pinDir, 0)
}

func (h *Hasher) identity(command string, args []string, pinDir string, treeMaxAge time.Duration) (string, error) {
	in := struct {
		Command    []string `json:"command"`
		Executable string   `json:"executable"`
		Files      []argPin `json:"files,omitempty"`
		PinDir     *dirPin  `json:"pin_dir,omitempty"`
	}{Command: append([]string{command}, args...)}
	path, err := exec.LookPath(command)
	if err != nil {
		return "", fmt.Errorf("%w: the command %s: %v", ErrUnpinnable, bounded(command), err)
	}
	if in.Executable, err = h.fileDigest(path); err != nil {
		return "", fmt.Errorf("%w: the executable: %v", ErrUnpinnable, err)
	}
	for i, a := range args {
		if a == "" {
			continue
		}
		fi, err := os.Stat(a)
		if err != nil || !fi.Mode().IsRegular() {
			continue // not a file (a flag, a value); a directory is pinned only as pinDir
		}
		d, err := h.fileDigest(a)
		if err != nil {
			return "", fmt.Errorf("%w: argument %d: %v", ErrUnpinnable, i+1, err)
		}
		in.Files = append(in.Files, argPin{Arg: i + 1, Digest: d})
	}
	if pinDir != "" {
		tree, err := h.tree(pinDir, treeMaxAge)
		if err != nil {
			return "", err
		}
		in.PinDir = &dirPin{Path: pinDir, Tree: tree}
	}
	return canonical.DigestValue(in)
}

type argPin struct {
	// Arg is the position in [command, args...] (the first argument is 1).
	Arg    int    `json:"arg"`
	Digest string `json:"sha256"`
}

type dirPin struct {
	Path string `json:"path"`
	Tree string `json:"tree"`
}

// tree returns dir's tree digest, walked at most maxAge ago.
func (h *Hasher) tree(dir string, maxAge time.Duration) (string, error) {
	if maxAge > 0 {
		h.mu.Lock()
		w, ok := h.trees[dir]
		h.mu.Unlock()
		if ok && time.Since(w.at) < maxAge {
			return w.tree, nil
		}
	}
	at := time.Now()
	tree, err := h.TreeDigest(dir)
	if err != nil {
		return "", err
	}
	h.mu.Lock()
	if h.trees == nil || len(h.trees) >= maxCached {
		h.trees = map[string]walked{}
	}
	h.trees[dir] = walked{tree: tree, at: at}
	h.mu.Unlock()
	return tree, nil
}

// TreeDigest returns `sha256:<hex>` over the entries of dir in lexical
// order, each its type, path relative to dir and content: a regular file's
// sha256 and whether it is executable, a symbolic link's target text. The
// walk stays inside dir (opened as an [os.Root]): a link that resolves
// outside it, or does not resolve, is refused, as are more than
// [MaxDirEntries] entries, [MaxDirBytes] bytes or [MaxDirDepth] levels.
func (h *Hasher) TreeDigest(dir string) (string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", fmt.Errorf("%w: the pinned directory: %v", ErrUnpinnable, err)
	}
	defer root.Close()
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("%w: the pinned directory: %v", ErrUnpinnable, err)
	}
	sum := sha256.New()
	var entries int
	var total int64
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		if entries++; entries > MaxDirEntries {
			return fmt.Errorf("more than %d entries", MaxDirEntries)
		}
		if depth(p) > MaxDirDepth {
			return fmt.Errorf("deeper than %d levels", MaxDirDepth)
		}
		switch t := d.Type(); {
		case t.IsDir():
			fmt.Fprintf(sum, "dir %s\n", strconv.Quote(p))
		case t&fs.ModeSymlink != 0:
			target, err := root.Readlink(p)
			if err != nil {
				return err
			}
			if _, err := root.Stat(p); err != nil {
				return fmt.Errorf("the symbolic link %s does not resolve inside the directory", strconv.Quote(bounded(p)))
			}
			fmt.Fprintf(sum, "link %s %s\n", strconv.Quote(p), strconv.Quote(target))
		case t.IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			if total += info.Size(); total > MaxDirBytes {
				return fmt.Errorf("more than %d bytes", MaxDirBytes)
			}
			digest, err := h.cachedDigest(filepath.Join(abs, p), info, func() (*os.File, error) { return root.Open(p) })
			if err != nil {
				return err
			}
			exe := "-"
			if info.Mode().Perm()&0o111 != 0 {
				exe = "x"
			}
			fmt.Fprintf(sum, "file %s %s %s\n", strconv.Quote(p), exe, digest)
		default:
			fmt.Fprintf(sum, "other %s %s\n", strconv.Quote(p), t.String())
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("%w: the pinned directory %s: %v", ErrUnpinnable, bounded(dir), err)
	}
	return canonical.DigestPrefix + hex.EncodeToString(sum.Sum(nil)), nil
}

// fileDigest is the sha256 of the regular file at path (symbolic links
// followed, as exec and an interpreter follow them).
func (h *Hasher) fileDigest(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	info, err := os.Stat(abs)
	if err != nil {
		return "", err
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", strconv.Quote(bounded(path)))
	}
	return h.cachedDigest(abs, info, func() (*os.File, error) { return os.Open(abs) })
}

// cachedDigest returns the cached digest of abs when info matches the
// entry, else hashes the file open returns (bounded by [MaxFileBytes]) and
// caches it under the opened file's own stat, unless the file changed
// within racyWindow of now.
func (h *Hasher) cachedDigest(abs string, info fs.FileInfo, open func() (*os.File, error)) (string, error) {
	k := keyOf(info)
	h.mu.Lock()
	c, ok := h.files[abs]
	h.mu.Unlock()
	if ok && c.key == k {
		return c.digest, nil
	}
	f, err := open()
	if err != nil {
		return "", err
	}
	defer f.Close()
	opened, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !opened.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", strconv.Quote(bounded(abs)))
	}
	if opened.Size() > MaxFileBytes {
		return "", fmt.Errorf("%s is larger than %d bytes", strconv.Quote(bounded(abs)), MaxFileBytes)
	}
	sum := sha256.New()
	if _, err := io.Copy(sum, io.LimitReader(f, MaxFileBytes+1)); err != nil {
		return "", err
	}
	digest := canonical.DigestPrefix + hex.EncodeToString(sum.Sum(nil))
	now := time.Now
	if h.now != nil {
		now = h.now
	}
	k = keyOf(opened)
	h.mu.Lock()
	h.hashed++
	if now().UnixNano()-k.changed() > int64(racyWindow) {
		if h.files == nil || len(h.files) >= maxCached {
			h.files = map[string]cached{}
		}
		h.files[abs] = cached{key: k, digest: digest}
	}
	h.mu.Unlock()
	return digest, nil
}

func depth(p string) int {
	n := 1
	for _, c := range p {
		if c == '/' {
			n++
		}
	}
	return n
}

// bounded shortens a path or command for an error message.
func bounded(s string) string {
	const max = 128
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
