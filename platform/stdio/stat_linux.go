package stdio

import (
	"io/fs"
	"syscall"
)

// fileKey is what a cached file digest is valid for: when any of it
// changes, the file is hashed again.
type fileKey struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // nanoseconds
}

func keyOf(info fs.FileInfo) fileKey {
	k := fileKey{size: info.Size(), mtime: info.ModTime().UnixNano()}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		k.dev, k.ino = uint64(st.Dev), uint64(st.Ino) // the field types differ across architectures
		k.ctime = int64(st.Ctim.Sec)*1e9 + int64(st.Ctim.Nsec)
	}
	return k
}

// changed is when the file last changed (content or metadata), in
// nanoseconds since the epoch.
func (k fileKey) changed() int64 { return max(k.mtime, k.ctime) }
