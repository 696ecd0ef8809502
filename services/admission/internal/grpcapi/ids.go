package grpcapi

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"

	"github.com/google/uuid"
)

// idPool makes receipt ids: version-7 UUIDs (RFC 9562), a millisecond
// timestamp then 74 random bits from crypto/rand, read 256 ids at a time.
// Time-ordered ids append to the receipts table's primary key instead of
// landing on a random page of it: random (version 4) ids made Postgres's
// share of a Check's cost larger than the handler's. A receipt id is no
// capability (GetReceipt is bound to the principal), and the receipt
// carries its decision time anyway. Safe for concurrent use.
type idPool struct {
	mu  sync.Mutex
	buf [256 * 10]byte
	pos int
	ok  bool
	now func() time.Time // nil: time.Now
}

func (p *idPool) next() string {
	var u uuid.UUID
	now := time.Now
	if p.now != nil {
		now = p.now
	}
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(now().UnixMilli()))
	copy(u[:6], ts[2:])
	p.mu.Lock()
	if !p.ok || p.pos == len(p.buf) {
		rand.Read(p.buf[:]) // never returns an error (crypto/rand)
		p.pos, p.ok = 0, true
	}
	copy(u[6:], p.buf[p.pos:p.pos+10])
	clear(p.buf[p.pos : p.pos+10]) // a handed-out id is not kept
	p.pos += 10
	p.mu.Unlock()
	u[6] = (u[6] & 0x0f) | 0x70 // version 7
	u[8] = (u[8] & 0x3f) | 0x80 // variant RFC 4122/9562
	return u.String()
}
