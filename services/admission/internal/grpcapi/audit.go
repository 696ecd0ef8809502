package grpcapi

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/admission/internal/cache"
	"github.com/toolcrib/toolcrib/services/admission/internal/decision"
)

// RecheckEventPrefix starts the event id of an ALLOW a re-check denied;
// the receipt id follows.
const RecheckEventPrefix = "allow-recheck:"

// IncidentReporter queues an unauthorized event for discovery's rollout
// guard (platform/incident.Reporter); it must not block.
type IncidentReporter interface {
	Report(req *discoveryv1.ReportIncidentRequest)
}

// maxAudits bounds the re-checks running at once; a sampled ALLOW that
// finds them all busy is not re-checked.
const maxAudits = 4

// auditTimeout bounds one re-check.
const auditTimeout = 5 * time.Second

// maybeAudit re-decides a sample (Options.AuditRate) of the ALLOWs answered
// from the decision cache, from direct reads of the material at the same
// policy epoch, generation and time, off the request path. A re-check
// that denies is an unauthorized event (a cached ALLOW the policy does
// not give: a tampered or corrupted Redis entry is the realistic cause):
// logged, counted and reported to discovery under
// `allow-recheck:<receipt id>`.
func (s *Server) maybeAudit(ctx context.Context, p principal.Principal, r decision.Request, f decision.Facts, res resolved,
	cached decision.Reason, level cache.Level, receiptID string) {
	if s.o.Incidents == nil || s.o.AuditRate <= 0 || res.pointer() == nil || cached != decision.Allow {
		return
	}
	if s.o.AuditRate < 1 && rand.Float64() >= s.o.AuditRate {
		return
	}
	select {
	case s.audits <- struct{}{}:
	default:
		return
	}
	go func() {
		defer func() { <-s.audits }()
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
		defer cancel()
		e, err := s.prelim(actx, p, r, &f, &res)
		if err != nil {
			s.o.Logger.DebugContext(actx, "re-check of a cached ALLOW not made", "error", err)
			return
		}
		if s.o.Audited != nil {
			s.o.Audited(e.Reason != decision.Allow)
		}
		if e.Reason == decision.Allow {
			return
		}
		ptr := res.pointer() // non-nil: checked before the re-check was started
		s.o.Logger.WarnContext(actx, "unauthorized event: a cached ALLOW that a re-check at the same epoch denies",
			"receipt_id", receiptID, "tool_id", r.ToolID, "server_id", ptr.ServerID, "audience_class", res.class,
			"generation", ptr.Generation, "policy_epoch", res.epoch, "cache", level.String(), "recheck", e.Reason.String())
		s.o.Incidents.Report(&discoveryv1.ReportIncidentRequest{EventId: RecheckEventPrefix + receiptID,
			Kind: discoveryv1.IncidentKind_INCIDENT_KIND_ALLOW_DENIED_ON_RECHECK, ServerId: ptr.ServerID, AudienceClass: res.class,
			Generation: ptr.Generation, TenantId: p.Tenant, ObservedAt: timestamppb.New(s.o.Now()),
			Detail: fmt.Sprintf("receipt %s: ALLOW of %s from the decision cache (%s) at policy epoch %d; a re-check from direct reads answers %s",
				receiptID, bounded(r.ToolID, decision.MaxToolIDBytes), level, res.epoch, e.Reason)})
	}()
}
