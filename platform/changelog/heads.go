package changelog

import (
	"sync"
	"time"
)

// HeadStream names one of the two Watch streams a replica follows.
type HeadStream int

// The two streams.
const (
	RegistryHead HeadStream = iota
	DiscoveryHead
)

func (s HeadStream) String() string { return [...]string{"registry", "discovery"}[s] }

// The reasons [Heads.Fresh] gives, after the stream's name.
const (
	notCaughtUp = " Watch has not caught up yet"
	noHeartbeat = " Watch sent no heartbeat within the validity window"
)

// Heads is the freshness of a replica that follows both Watch streams
// (admission and lease replicas, I8): the newest heartbeat of each stream
// and the validity window. The replica answers from its state only while
// [Heads.Fresh] holds; [Heads.FreshUntil] is the bound it promises. Safe
// for concurrent use.
type Heads struct {
	window time.Duration
	now    func() time.Time

	mu    sync.RWMutex
	beats [2]time.Time // newest sign of life per stream (local time)
	// follow, when set for a stream, is its follower's freshness: the
	// newest heartbeat is read from it instead of beats.
	follow [2]func() Freshness
}

// NewHeads returns heads without any heartbeat, with the validity window
// (I8); now is the clock (nil for time.Now).
func NewHeads(window time.Duration, now func() time.Time) *Heads {
	if now == nil {
		now = time.Now
	}
	return &Heads{window: window, now: now}
}

// Follow makes the follower's freshness the source of stream s's newest
// heartbeat ([Freshness.At]); call it before serving.
func (h *Heads) Follow(s HeadStream, freshness func() Freshness) {
	h.mu.Lock()
	h.follow[s] = freshness
	h.mu.Unlock()
}

// beatsNow returns the newest heartbeat of each stream.
func (h *Heads) beatsNow() [2]time.Time {
	h.mu.RLock()
	b, follow := h.beats, h.follow
	h.mu.RUnlock()
	for s, f := range follow {
		if f != nil {
			b[s] = f().At
		}
	}
	return b
}

// Heartbeat records that stream s was alive and caught up now (a
// heartbeat, or a change delivered after the stream caught up). It is
// ignored for a stream that [Heads.Follow]s a follower.
func (h *Heads) Heartbeat(s HeadStream) {
	h.mu.Lock()
	h.beats[s] = h.now()
	h.mu.Unlock()
}

// Beat returns the newest heartbeat of s; zero when none.
func (h *Heads) Beat(s HeadStream) time.Time { return h.beatsNow()[s] }

// FreshUntil is the freshness bound: the older of the two streams' newest
// heartbeats plus the window; zero while either stream never caught up.
// The heads are fresh exactly while now is before it.
func (h *Heads) FreshUntil() time.Time {
	beats := h.beatsNow()
	if beats[0].IsZero() || beats[1].IsZero() {
		return time.Time{}
	}
	oldest := beats[0]
	if beats[1].Before(oldest) {
		oldest = beats[1]
	}
	return oldest.Add(h.window)
}

// Fresh reports whether both streams' newest heartbeats are younger than
// the window ([Freshness.Fresh]: one exactly the window old is stale), and
// if not which stream is behind (for health, logs and errors).
func (h *Heads) Fresh() (bool, string) {
	now := h.now()
	for s, b := range h.beatsNow() {
		if b.IsZero() {
			return false, HeadStream(s).String() + notCaughtUp
		}
		if !(Freshness{At: b}).Fresh(now, h.window) {
			return false, HeadStream(s).String() + noHeartbeat
		}
	}
	return true, ""
}
