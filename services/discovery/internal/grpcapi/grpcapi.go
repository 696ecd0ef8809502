package grpcapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode"

	"google.golang.org/protobuf/types/known/timestamppb"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/ids"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/discovery/internal/scan"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
	"github.com/toolcrib/toolcrib/services/discovery/registryclient"
)

// Scheduler queues scans.
type Scheduler interface {
	// Trigger queues scans; see [scan.Scanner.Trigger] for its errors.
	Trigger(ctx context.Context, serverID, audienceClass string) ([]scan.Ticket, error)
	// Binding reads a server as an audience class reads it from the
	// registry; see [registryclient.Registry.Binding].
	Binding(ctx context.Context, serverID, audienceClass string) (registryclient.Binding, error)
}

// Server is the DiscoveryService implementation.
type Server struct {
	discoveryv1.UnimplementedDiscoveryServiceServer
	store     *store.Store
	log       *changelog.Log
	scans     Scheduler
	heartbeat time.Duration
	draining  <-chan struct{}
}

// New returns the service. heartbeat is the Watch heartbeat interval;
// draining closes when the server starts shutting down (Watch then ends).
func New(st *store.Store, log *changelog.Log, scans Scheduler, heartbeat time.Duration, draining <-chan struct{}) *Server {
	return &Server{store: st, log: log, scans: scans, heartbeat: heartbeat, draining: draining}
}

func checkServer(v *apierror.Violations, field, id string) {
	switch {
	case id == "":
		v.Add(field, "required")
	case !ids.ValidServerID(id):
		v.Add(field, "must match %s", ids.ServerIDPattern)
	}
}

func checkClass(v *apierror.Violations, field, name string, required bool) {
	switch {
	case name == "" && required:
		v.Add(field, "required")
	case name != "" && !ids.ValidClass(name):
		v.Add(field, "must be %s", ids.ClassSyntax)
	}
}

func checkPageSize(v *apierror.Violations, n int32) int {
	switch {
	case n < 0:
		v.Add("page_size", "must not be negative")
	case n == 0:
		return 50
	case n > 500:
		return 500
	}
	return int(n)
}

// pair is a request naming a (server, audience class).
type pair interface {
	GetServerId() string
	GetAudienceClass() string
}

// pairViolations checks a request's server id and audience class (both
// required).
func pairViolations(req pair) apierror.Violations {
	var v apierror.Violations
	checkServer(&v, "server_id", req.GetServerId())
	checkClass(&v, "audience_class", req.GetAudienceClass(), true)
	return v
}

// pairVisible returns whether p may read the pair; false (and no error)
// when discovery knows nothing of it.
func (s *Server) pairVisible(ctx context.Context, p principal.Principal, req pair) (bool, error) {
	tenant, err := s.store.Tenant(ctx, req.GetServerId(), req.GetAudienceClass())
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return visible(p, tenant), nil
}

// token encodes and decodes page tokens (opaque to clients).
func encodeToken(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeToken(s string, v any) bool {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && json.Unmarshal(b, v) == nil
}

// visible reports whether p may read the tenant's data.
func visible(p principal.Principal, tenant string) bool { return p.SeesTenant(tenant) }

// TriggerScan implements the RPC.
func (s *Server) TriggerScan(ctx context.Context, req *discoveryv1.TriggerScanRequest) (*discoveryv1.TriggerScanResponse, error) {
	if _, err := principal.RequireAdminOrService(ctx); err != nil {
		return nil, err
	}
	var v apierror.Violations
	checkServer(&v, "server_id", req.GetServerId())
	checkClass(&v, "audience_class", req.GetAudienceClass(), false)
	if err := v.Err(); err != nil {
		return nil, err
	}
	tickets, err := s.scans.Trigger(ctx, req.GetServerId(), req.GetAudienceClass())
	if err != nil {
		return nil, translate(err)
	}
	resp := &discoveryv1.TriggerScanResponse{}
	for _, t := range tickets {
		resp.Scans = append(resp.Scans, &discoveryv1.ScanTicket{ServerId: t.ServerID, AudienceClass: t.AudienceClass, ScanId: t.ScanID, AlreadyQueued: t.AlreadyQueued})
	}
	return resp, nil
}

// GetRun implements the RPC.
func (s *Server) GetRun(ctx context.Context, req *discoveryv1.GetRunRequest) (*discoveryv1.GetRunResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	var v apierror.Violations
	id := checkRunID(&v, "run_id", req.GetRunId())
	if err := v.Err(); err != nil {
		return nil, err
	}
	run, err := s.store.GetRun(ctx, id, req.GetIncludePages())
	if err == nil && !visible(p, run.GetTenantId()) {
		err = notFound(store.KindRun, id)
	}
	if err == nil {
		run.Comparison, err = s.store.RunComparison(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			err = nil
		}
	}
	if err != nil {
		return nil, translate(err)
	}
	return &discoveryv1.GetRunResponse{Run: run}, nil
}

type runToken struct {
	StartedAt time.Time `json:"t"`
	RunID     string    `json:"r"`
}

// ListRuns implements the RPC.
func (s *Server) ListRuns(ctx context.Context, req *discoveryv1.ListRunsRequest) (*discoveryv1.ListRunsResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	var v apierror.Violations
	if req.GetServerId() != "" {
		checkServer(&v, "server_id", req.GetServerId())
	}
	checkClass(&v, "audience_class", req.GetAudienceClass(), false)
	checkScanID(&v, "scan_id", req.GetScanId())
	if len(req.GetStates()) > len(catalogv1.DiscoveryState_name) {
		v.Add("states", "more than %d states", len(catalogv1.DiscoveryState_name))
	}
	for _, st := range req.GetStates() {
		if st == catalogv1.DiscoveryState_DISCOVERY_STATE_UNSPECIFIED || catalogv1.DiscoveryState_name[int32(st)] == "" {
			v.Add("states", "unknown state %d", st)
		}
	}
	limit := checkPageSize(&v, req.GetPageSize())
	var after *store.RunCursor
	if t := req.GetPageToken(); t != "" {
		var tok runToken
		if !decodeToken(t, &tok) || !uuidPattern.MatchString(tok.RunID) {
			v.Add("page_token", "not a token from this service")
		} else {
			after = &store.RunCursor{StartedAt: tok.StartedAt, RunID: tok.RunID}
		}
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	f := store.RunFilter{ServerID: req.GetServerId(), AudienceClass: req.GetAudienceClass(), ScanID: req.GetScanId(), States: req.GetStates()}
	if !p.Admin && !p.Service {
		if p.Tenant == "" {
			return &discoveryv1.ListRunsResponse{}, nil
		}
		f.TenantID = p.Tenant
	}
	runs, more, err := s.store.ListRuns(ctx, f, after, limit)
	if err != nil {
		return nil, translate(err)
	}
	resp := &discoveryv1.ListRunsResponse{Runs: runs}
	if more && len(runs) > 0 {
		last := runs[len(runs)-1]
		resp.NextPageToken = encodeToken(runToken{StartedAt: last.GetStartedAt().AsTime(), RunID: last.GetRunId()})
	}
	return resp, nil
}

// pointer reads a pointer the principal may see.
func (s *Server) pointer(ctx context.Context, p principal.Principal, server, aud string) (*discoveryv1.ActivePointer, error) {
	ptr, err := s.store.ActivePointer(ctx, server, aud)
	if err == nil && !visible(p, ptr.GetTenantId()) {
		err = notFound(store.KindActivePointer, store.PointerID(server, aud))
	}
	return ptr, err
}

type toolsToken struct {
	Generation int64 `json:"g"`
	Offset     int   `json:"o"`
}

// toolsPage validates tool paging fields.
func toolsPage(v *apierror.Violations, size int32, token string) (limit int, tok toolsToken, hasToken bool) {
	if size < 0 {
		v.Add("tools_page_size", "must not be negative")
	}
	if token != "" {
		if !decodeToken(token, &tok) || tok.Generation < 1 || tok.Offset < 0 {
			v.Add("tools_page_token", "not a token from this service")
		}
		hasToken = true
	}
	return int(size), tok, hasToken
}

// snapshot reads a snapshot page and fills what is derived from raw JSON.
func (s *Server) snapshot(ctx context.Context, server, aud string, gen int64, offset, limit int) (*catalogv1.Snapshot, string, error) {
	snap, total, err := s.store.Snapshot(ctx, server, aud, gen, offset, limit)
	if err != nil {
		return nil, "", err
	}
	for _, t := range snap.GetTools() {
		describe(t)
	}
	next := ""
	if limit > 0 && offset+len(snap.GetTools()) < total {
		next = encodeToken(toolsToken{Generation: gen, Offset: offset + len(snap.GetTools())})
	}
	return snap, next, nil
}

// GetActiveSnapshot implements the RPC.
func (s *Server) GetActiveSnapshot(ctx context.Context, req *discoveryv1.GetActiveSnapshotRequest) (*discoveryv1.GetActiveSnapshotResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	v := pairViolations(req)
	limit, tok, hasTok := toolsPage(&v, req.GetToolsPageSize(), req.GetToolsPageToken())
	if err := v.Err(); err != nil {
		return nil, err
	}
	ptr, err := s.pointer(ctx, p, req.GetServerId(), req.GetAudienceClass())
	if err != nil {
		return nil, translate(err)
	}
	resp := &discoveryv1.GetActiveSnapshotResponse{Pointer: ptr}
	if ptr.GetState() == discoveryv1.PointerState_POINTER_STATE_CLOSED {
		return resp, nil
	}
	if hasTok && tok.Generation != ptr.GetGeneration() {
		return nil, translate(movedError{})
	}
	resp.Snapshot, resp.NextToolsPageToken, err = s.snapshot(ctx, req.GetServerId(), req.GetAudienceClass(), ptr.GetGeneration(), tok.Offset, limit)
	if err != nil {
		return nil, translate(err)
	}
	return resp, nil
}

// GetSnapshot implements the RPC.
func (s *Server) GetSnapshot(ctx context.Context, req *discoveryv1.GetSnapshotRequest) (*discoveryv1.GetSnapshotResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	v := pairViolations(req)
	if req.GetGeneration() < 1 {
		v.Add("generation", "required, from 1")
	}
	limit, tok, hasTok := toolsPage(&v, req.GetToolsPageSize(), req.GetToolsPageToken())
	if hasTok && tok.Generation != req.GetGeneration() {
		v.Add("tools_page_token", "belongs to another generation")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	if ok, err := s.pairVisible(ctx, p, req); err != nil || !ok {
		if err == nil {
			err = notFound(store.KindGeneration, store.GenerationID(req.GetServerId(), req.GetAudienceClass(), req.GetGeneration()))
		}
		return nil, translate(err)
	}
	snap, next, err := s.snapshot(ctx, req.GetServerId(), req.GetAudienceClass(), req.GetGeneration(), tok.Offset, limit)
	if err != nil {
		return nil, translate(err)
	}
	return &discoveryv1.GetSnapshotResponse{Snapshot: snap, NextToolsPageToken: next}, nil
}

type generationsToken struct {
	Before int64 `json:"b"`
}

// ListGenerations implements the RPC.
func (s *Server) ListGenerations(ctx context.Context, req *discoveryv1.ListGenerationsRequest) (*discoveryv1.ListGenerationsResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	v := pairViolations(req)
	limit := checkPageSize(&v, req.GetPageSize())
	var tok generationsToken
	if t := req.GetPageToken(); t != "" && (!decodeToken(t, &tok) || tok.Before < 1) {
		v.Add("page_token", "not a token from this service")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	if ok, err := s.pairVisible(ctx, p, req); err != nil || !ok {
		if err != nil {
			return nil, translate(err)
		}
		return &discoveryv1.ListGenerationsResponse{}, nil
	}
	gens, more, err := s.store.ListGenerations(ctx, req.GetServerId(), req.GetAudienceClass(), tok.Before, limit)
	if err != nil {
		return nil, translate(err)
	}
	resp := &discoveryv1.ListGenerationsResponse{Generations: gens}
	if more && len(gens) > 0 {
		resp.NextPageToken = encodeToken(generationsToken{Before: gens[len(gens)-1].GetGeneration()})
	}
	return resp, nil
}

// Rollback implements the RPC. Freezing lease issuance for the server (the
// other half of I10) belongs to the lease service and is not done here.
func (s *Server) Rollback(ctx context.Context, req *discoveryv1.RollbackRequest) (*discoveryv1.RollbackResponse, error) {
	if _, err := principal.RequireAdminOrService(ctx); err != nil {
		return nil, err
	}
	v := pairViolations(req)
	if req.GetExpectedGeneration() < 1 {
		v.Add("expected_generation", "required, from 1")
	}
	if req.GetToGeneration() < 0 {
		v.Add("to_generation", "must not be negative")
	} else if req.GetToGeneration() >= req.GetExpectedGeneration() && req.GetToGeneration() > 0 {
		v.Add("to_generation", "must be older than expected_generation")
	}
	if len(req.GetReason()) > 1000 {
		v.Add("reason", "at most 1000 bytes")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	c, err := s.store.Rollback(ctx, req.GetServerId(), req.GetAudienceClass(), req.GetExpectedGeneration(), req.GetToGeneration(), req.GetReason())
	if err != nil {
		return nil, translate(err)
	}
	return &discoveryv1.RollbackResponse{Pointer: c.Pointer, Receipt: c.Receipt}, nil
}

// BindGeneration implements the RPC.
func (s *Server) BindGeneration(ctx context.Context, req *discoveryv1.BindGenerationRequest) (*discoveryv1.BindGenerationResponse, error) {
	if _, err := principal.RequireAdminOrService(ctx); err != nil {
		return nil, err
	}
	v := pairViolations(req)
	if req.GetGeneration() < 1 {
		v.Add("generation", "required, from 1")
	}
	if req.GetRunId() == "" || len(req.GetRunId()) > 200 {
		v.Add("run_id", "required, at most 200 bytes")
	} else if strings.ContainsFunc(req.GetRunId(), unicode.IsControl) {
		v.Add("run_id", "contains a control character")
	}
	now := time.Now()
	switch until := req.GetBoundUntil(); {
	case until == nil:
		v.Add("bound_until", "required")
	case !until.IsValid():
		v.Add("bound_until", "not a valid timestamp")
	case !until.AsTime().After(now):
		v.Add("bound_until", "must be in the future")
	case until.AsTime().After(now.Add(24 * time.Hour)):
		v.Add("bound_until", "at most 24 hours ahead")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	until, err := s.store.Bind(ctx, req.GetServerId(), req.GetAudienceClass(), req.GetGeneration(), req.GetRunId(), req.GetBoundUntil().AsTime())
	if err != nil {
		return nil, translate(err)
	}
	return &discoveryv1.BindGenerationResponse{BoundUntil: timestamppb.New(until)}, nil
}
