package incident

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
)

type sender struct {
	mu    sync.Mutex
	fails map[string]codes.Code // answer this code once per event id
	got   []string
}

func (s *sender) ReportIncident(_ context.Context, in *discoveryv1.ReportIncidentRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.fails[in.GetEventId()]; ok {
		delete(s.fails, in.GetEventId())
		return status.Error(c, "no")
	}
	s.got = append(s.got, in.GetEventId())
	return nil
}

func (s *sender) delivered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// TestReporterRetriesUnavailableNotRefused: a report discovery could not
// take (UNAVAILABLE) is sent again and delivered; one it refused
// (INVALID_ARGUMENT) is not sent again.
func TestReporterRetriesUnavailableNotRefused(t *testing.T) {
	s := &sender{fails: map[string]codes.Code{"a": codes.Unavailable, "b": codes.InvalidArgument}}
	r := New(s, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = r.Run(ctx) }()
	for _, id := range []string{"a", "b", "c"} {
		r.Report(&discoveryv1.ReportIncidentRequest{EventId: id})
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(s.delivered()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if got := s.delivered(); len(got) != 2 || got[0] != "a" || got[1] != "c" {
		t.Fatalf("delivered %v, want [a c]", got)
	}
}
