package discovery

import (
	"context"
	"fmt"
	"time"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
)

// PointerKey names the active pointer of a (server, audience class).
type PointerKey struct {
	ServerID      string
	AudienceClass string
}

// WaitPointers blocks until, for every key, a pointer change after
// revision `from` satisfies done (nil: the pointer is ACTIVE), and returns
// the last such pointer of each key. It follows the Watch stream, so it
// costs one call however many pointers it waits for; benchmarks use it to
// time "every server committed". A 0 `from` counts every change still kept.
func WaitPointers(ctx context.Context, c discoveryv1.DiscoveryServiceClient, from int64, keys []PointerKey,
	done func(*discoveryv1.ActivePointer) bool) (map[PointerKey]*discoveryv1.ActivePointer, error) {
	if done == nil {
		done = func(p *discoveryv1.ActivePointer) bool {
			return p.GetState() == discoveryv1.PointerState_POINTER_STATE_ACTIVE
		}
	}
	want := make(map[PointerKey]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	got := make(map[PointerKey]*discoveryv1.ActivePointer, len(keys))
	if len(want) == 0 {
		return got, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Watch(ctx, &discoveryv1.WatchRequest{FromRevision: from})
	if err != nil {
		return nil, err
	}
	for {
		msg, err := stream.Recv()
		if err != nil {
			return got, fmt.Errorf("discovery: waiting for %d pointer(s), %d done: %w", len(want), len(got), err)
		}
		p := msg.GetChange().GetPointer()
		if p == nil {
			continue
		}
		k := PointerKey{ServerID: p.GetServerId(), AudienceClass: p.GetAudienceClass()}
		if !want[k] {
			continue
		}
		if done(p) {
			got[k] = p
		} else {
			delete(got, k)
		}
		if len(got) == len(want) {
			return got, nil
		}
	}
}

// Terminal reports whether a run ended (it has a finish time).
func Terminal(r *discoveryv1.Run) bool { return r.GetFinishedAt() != nil }

// WaitScan polls the runs of a scan (a TriggerScan ticket's scan_id) every
// 50 ms until one satisfies done (nil: a run that ended in a state that is
// not retried — anything but INCOMPLETE) and returns it.
func WaitScan(ctx context.Context, c discoveryv1.DiscoveryServiceClient, scanID string, done func(*discoveryv1.Run) bool) (*discoveryv1.Run, error) {
	if done == nil {
		done = func(r *discoveryv1.Run) bool {
			return Terminal(r) && r.GetState() != catalogv1.DiscoveryState_DISCOVERY_STATE_INCOMPLETE
		}
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		resp, err := c.ListRuns(ctx, &discoveryv1.ListRunsRequest{ScanId: scanID, PageSize: 500})
		if err != nil {
			return nil, err
		}
		for _, r := range resp.GetRuns() {
			if done(r) {
				return r, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("discovery: waiting for scan %s: %w", scanID, ctx.Err())
		case <-t.C:
		}
	}
}

// Activated reports whether a run that ended left its pointer active at the
// run's catalog: it committed a generation (ELIGIBLE or
// UNVERSIONED_OBSERVATION) or proved the active one again (UNCHANGED, which
// confirms a generation).
func Activated(r *discoveryv1.Run) bool {
	return Terminal(r) && (r.GetGeneration() > 0 || r.GetConfirmedGeneration() > 0)
}

// Retried reports whether discovery tries a scan again after this run
// ended: an INCOMPLETE run is retried with backoff (after the last attempt,
// at the next periodic refresh), unless its server or class is gone.
func Retried(r *discoveryv1.Run) bool {
	return Terminal(r) && r.GetState() == catalogv1.DiscoveryState_DISCOVERY_STATE_INCOMPLETE &&
		r.GetReason() != discoveryv1.RunReason_RUN_REASON_NOT_REGISTERED
}

// EndedRuns returns the ids of the runs of a server (as one audience class,
// or as any when audienceClass is empty) that have ended, among its newest
// 500. Taken before a TriggerScan, it tells [WaitAttempt] which attempts
// ended before the trigger.
func EndedRuns(ctx context.Context, c discoveryv1.DiscoveryServiceClient, serverID, audienceClass string) (map[string]bool, error) {
	resp, err := c.ListRuns(ctx, &discoveryv1.ListRunsRequest{ServerId: serverID, AudienceClass: audienceClass, PageSize: 500})
	if err != nil {
		return nil, err
	}
	ended := map[string]bool{}
	for _, r := range resp.GetRuns() {
		if Terminal(r) {
			ended[r.GetRunId()] = true
		}
	}
	return ended, nil
}

// WaitAttempt waits until the attempt a TriggerScan ticket stands for has
// ended and returns it, however it ended: it never waits through the
// retries of a failing scan. That attempt is the first of the ticket's scan
// to end that is not in endedBefore (see [EndedRuns]): for a new scan its
// first attempt; for a scan already queued, the attempt running now, or the
// one the trigger made due (a manual trigger does not wait out a retry
// backoff).
func WaitAttempt(ctx context.Context, c discoveryv1.DiscoveryServiceClient, t *discoveryv1.ScanTicket, endedBefore map[string]bool) (*discoveryv1.Run, error) {
	return WaitScan(ctx, c, t.GetScanId(), func(r *discoveryv1.Run) bool { return Terminal(r) && !endedBefore[r.GetRunId()] })
}
