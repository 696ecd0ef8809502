//go:build !linux

package stdio

import "io/fs"

// fileKey is what a cached file digest is valid for: when any of it
// changes, the file is hashed again. Outside Linux it is the size and the
// modification time only.
type fileKey struct {
	size  int64
	mtime int64 // nanoseconds
}

func keyOf(info fs.FileInfo) fileKey {
	return fileKey{size: info.Size(), mtime: info.ModTime().UnixNano()}
}

// changed is when the file last changed, in nanoseconds since the epoch.
func (k fileKey) changed() int64 { return k.mtime }
