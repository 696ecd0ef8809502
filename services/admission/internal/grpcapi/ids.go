package grpcapi

import (
	"crypto/rand"
	"sync"

	"github.com/google/uuid"
)

// idPool makes random (version 4) receipt ids from crypto/rand read 256
// ids at a time: one read of the system's randomness per call was a
// measurable share of a cached Check. The ids are as unpredictable as
// uuid.NewString's; only the reads are batched. Safe for concurrent use.
type idPool struct {
	mu  sync.Mutex
	buf [256 * 16]byte
	pos int // next unused byte; len(buf) when empty
	ok  bool
}

func (p *idPool) next() string {
	var u uuid.UUID
	p.mu.Lock()
	if !p.ok || p.pos == len(p.buf) {
		rand.Read(p.buf[:]) // never returns an error (crypto/rand)
		p.pos, p.ok = 0, true
	}
	copy(u[:], p.buf[p.pos:p.pos+16])
	clear(p.buf[p.pos : p.pos+16]) // a handed-out id is not kept
	p.pos += 16
	p.mu.Unlock()
	u[6] = (u[6] & 0x0f) | 0x40 // version 4
	u[8] = (u[8] & 0x3f) | 0x80 // variant RFC 4122
	return u.String()
}
