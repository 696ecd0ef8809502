package grpcapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(t *testing.T) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, s := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		if s == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatalf("log line %q: %v", s, err)
		}
		out = append(out, m)
	}
	return out
}

// TestDenialsAreLoggedAtInfo: a denied Check leaves one info line with
// its reason, the tool, the principal and the receipt; an allowed one
// leaves none.
func TestDenialsAreLoggedAtInfo(t *testing.T) {
	var logs lockedBuffer
	r := newRigWith(t, world(), nil, func(o *Options) {
		o.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	if got := check(t, r.client(t, "alice", "demo-a"), okReq()); got.GetDecision() != admissionv1.Decision_DECISION_ALLOW {
		t.Fatalf("alice: %v %s", got.GetReason(), got.GetDetail())
	}
	if l := logs.lines(t); len(l) != 0 {
		t.Fatalf("an ALLOW logged %v", l)
	}
	denied := check(t, r.client(t, "mallory", "demo-a"), okReq())
	l := logs.lines(t)
	if len(l) != 1 {
		t.Fatalf("one denial logged %d lines: %v", len(l), l)
	}
	want := map[string]any{"level": "INFO", "msg": "check denied", "reason": "NOT_FOUND", "tool_id": "logistics.shipment_status",
		"tenant": "demo-a", "subject": "mallory", "receipt": denied.GetReceipt().GetReceiptId(), "detail": denied.GetDetail()}
	for k, v := range want {
		if l[0][k] != v {
			t.Fatalf("denial line %v: %s = %v, want %v", l[0], k, l[0][k], v)
		}
	}
}
