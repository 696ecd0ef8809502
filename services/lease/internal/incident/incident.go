package incident

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"google.golang.org/protobuf/types/known/timestamppb"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/lease/internal/watch"
)

// EventPrefix starts the event id of a lease-after-revoke incident; the
// lease id follows, so every replica reports one lease under one id.
const EventPrefix = "lease-after-revoke:"

// Revocations is the revocation history ([watch.View.RevokedBefore]).
type Revocations interface {
	RevokedBefore(tenant, subject string, epoch int64, issuedAt time.Time, allowance time.Duration) (watch.Revocation, bool)
}

// Reporter queues a report for discovery without blocking
// (platform/incident.Reporter).
type Reporter interface {
	Report(req *discoveryv1.ReportIncidentRequest)
}

// Options configure a [Detector].
type Options struct {
	Revocations Revocations
	Reporter    Reporter
	// Allowance is how much earlier than the lease's issue a revocation
	// must have committed to count (clock skew between the registry's
	// database and the issuing replica; `iat` is whole seconds, rounded
	// down, so never later than the issue). 0 means 1 s.
	Allowance time.Duration
	// Found is called for each incident found (metrics); nil for none.
	Found  func()
	Logger *slog.Logger
}

// Detector is the lease-after-revoke rule.
type Detector struct {
	o Options

	mu   sync.Mutex                   // makes Observe's check-then-add one step
	seen *lru.Cache[string, struct{}] // lease ids found, the newest maxSeen
}

// maxSeen bounds the lease ids remembered as reported; past it the least
// recently seen is forgotten (a lease lives at most 60 s, so one reported
// that long ago is not presented again).
const maxSeen = 8192

// New returns a detector.
func New(o Options) *Detector {
	if o.Allowance <= 0 {
		o.Allowance = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	seen, _ := lru.New[string, struct{}](maxSeen)
	return &Detector{o: o, seen: seen}
}

// Observe looks at one lease whose token verified (signature, expiry,
// audience, proof), whatever Verify answers next: a lease issued on
// withdrawn authority is an unauthorized event even when this replica
// refuses it, since a replica behind the registry would not. It never
// blocks, and reports one lease once per process.
func (d *Detector) Observe(ctx context.Context, c lease.Claims) {
	r, ok := d.o.Revocations.RevokedBefore(c.Tenant, c.Subject, c.PolicyEpoch, c.IssuedAt, d.o.Allowance)
	if !ok {
		return
	}
	d.mu.Lock()
	_, dup := d.seen.Get(c.ID)
	if !dup {
		d.seen.Add(c.ID, struct{}{})
	}
	d.mu.Unlock()
	if dup {
		return
	}
	if d.o.Found != nil {
		d.o.Found()
	}
	detail := fmt.Sprintf("lease %s of %s at policy epoch %d issued %s, after the revocation of the subject's grant at epoch %d committed %s (registry revision %d)",
		c.ID, c.Tool, c.PolicyEpoch, c.IssuedAt.UTC().Format(time.RFC3339), r.Epoch, r.CommittedAt.UTC().Format(time.RFC3339Nano), r.Revision)
	d.o.Logger.WarnContext(ctx, "unauthorized event: a lease issued after its grant was revoked", "lease_id", c.ID,
		"server_id", c.Server, "audience_class", c.AudienceClass, "tool_id", c.Tool, "tenant", c.Tenant,
		"lease_epoch", c.PolicyEpoch, "revoke_epoch", r.Epoch, "revoked_at", r.CommittedAt, "issued_at", c.IssuedAt)
	d.o.Reporter.Report(&discoveryv1.ReportIncidentRequest{EventId: EventPrefix + c.ID, Kind: discoveryv1.IncidentKind_INCIDENT_KIND_LEASE_AFTER_REVOKE,
		ServerId: c.Server, AudienceClass: c.AudienceClass, Generation: c.Generation, TenantId: c.Tenant,
		ObservedAt: timestamppb.Now(), Detail: detail})
}
