package grpcapi

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/platform/ids"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/discovery/internal/comparison"
	"github.com/toolcrib/toolcrib/services/discovery/internal/store"
	"github.com/toolcrib/toolcrib/services/discovery/registryclient"
)

// Bounds of a static tool list (see SetStaticToolList).
const (
	MaxStaticTools       = 10_000
	MaxStaticSchemaBytes = 64 << 10
	MaxStaticListBytes   = 2 << 20
	maxReasonBytes       = 1000
	// maxToolViolations is how many per-entry problems an answer lists.
	maxToolViolations = 20
)

// ReasonStaticListMoved is the ErrorInfo reason of an ABORTED
// SetStaticToolList.
const ReasonStaticListMoved = "STATIC_LIST_MOVED"

// checkStaticTools validates the entries of a static list and returns them
// with the canonical input schemas by name.
func checkStaticTools(v *apierror.Violations, tools []*discoveryv1.StaticTool) ([]comparison.Entry, map[string]string) {
	if len(tools) > MaxStaticTools {
		v.Add("tools", "%d tools, at most %d", len(tools), MaxStaticTools)
		return nil, nil
	}
	total := 0
	for _, t := range tools {
		total += len(t.GetName()) + len(t.GetDescriptorDigest()) + len(t.GetInputSchema()) + len(t.GetInputSchemaDigest())
	}
	if total > MaxStaticListBytes {
		v.Add("tools", "%d bytes of names, digests and schemas, at most %d", total, MaxStaticListBytes)
		return nil, nil
	}
	entries := make([]comparison.Entry, 0, len(tools))
	schemas := map[string]string{}
	seen := make(map[string]int, len(tools))
	problems := 0
	add := func(i int, field, format string, args ...any) {
		problems++
		if problems <= maxToolViolations {
			v.Add(fieldAt(i, field), format, args...)
		}
	}
	for i, t := range tools {
		e := comparison.Entry{Name: t.GetName(), DescriptorDigest: t.GetDescriptorDigest()}
		switch {
		case e.Name == "":
			add(i, "name", "required")
		case !ids.ValidToolName(e.Name):
			add(i, "name", "%s is not a tool name (%s)", apierror.Echo(e.Name), ids.ToolNamePattern)
		default:
			if j, dup := seen[e.Name]; dup {
				add(i, "name", "%s is also tools[%d]: names must be unique", e.Name, j)
			}
			seen[e.Name] = i
		}
		if e.DescriptorDigest != "" && !canonical.ValidDigest(e.DescriptorDigest) {
			add(i, "descriptor_digest", "must be sha256: followed by 64 lowercase hex digits")
		}
		if t.GetInputSchemaDigest() != "" {
			add(i, "input_schema_digest", "output only: give input_schema")
		}
		if sc := t.GetInputSchema(); len(sc) > 0 {
			switch {
			case e.DescriptorDigest != "":
				add(i, "input_schema", "give descriptor_digest or input_schema, not both")
			case len(sc) > MaxStaticSchemaBytes:
				add(i, "input_schema", "%d bytes, at most %d", len(sc), MaxStaticSchemaBytes)
			case !utf8.Valid(sc):
				add(i, "input_schema", "not UTF-8 JSON")
			default:
				c, err := canonical.Transform(sc)
				switch {
				case err != nil:
					add(i, "input_schema", "not valid JSON (%s)", apierror.Echo(err.Error()))
				case c[0] != '{':
					add(i, "input_schema", "must be a JSON object")
				default:
					e.InputSchemaDigest = canonical.DigestBytes(c)
					schemas[e.Name] = string(c)
				}
			}
		}
		entries = append(entries, e)
	}
	if problems > maxToolViolations {
		v.Add("tools", "%d more problems not listed", problems-maxToolViolations)
	}
	return entries, schemas
}

func fieldAt(i int, field string) string {
	return "tools[" + strconv.Itoa(i) + "]." + field
}

func checkReason(v *apierror.Violations, reason string) {
	switch {
	case len(reason) > maxReasonBytes:
		v.Add("reason", "at most %d bytes", maxReasonBytes)
	case !utf8.ValidString(reason) || strings.ContainsFunc(reason, unicode.IsControl):
		v.Add("reason", "must be UTF-8 text without control characters")
	}
}

// SetStaticToolList implements the RPC.
func (s *Server) SetStaticToolList(ctx context.Context, req *discoveryv1.SetStaticToolListRequest) (*discoveryv1.SetStaticToolListResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	v := pairViolations(req)
	if req.GetExpectedVersion() < 0 {
		v.Add("expected_version", "must not be negative")
	}
	checkReason(&v, req.GetReason())
	entries, schemas := checkStaticTools(&v, req.GetTools())
	if err := v.Err(); err != nil {
		return nil, err
	}
	server, class := req.GetServerId(), req.GetAudienceClass()
	// Another tenant's class looks exactly as if it did not exist.
	if !visible(p, ids.TenantOfClass(class)) {
		return nil, translate(notFound("audience class", class))
	}
	b, err := s.scans.Binding(ctx, server, class)
	switch {
	case errors.Is(err, registryclient.ErrNotFound):
		return nil, translate(notFound("server or audience class", store.PointerID(server, class)))
	case err != nil:
		return nil, translate(err)
	case !visible(p, b.TenantID):
		return nil, translate(notFound("audience class", class))
	case b.Binding == nil:
		return nil, apierror.FailedPrecondition(ReasonNotCovered,
			"audience class "+apierror.Prefix(class)+" does not cover server "+apierror.Prefix(server))
	case !p.Admin && !(p.Owns(b.Server.GetOwner()) && p.Tenant == b.TenantID):
		return nil, apierror.PermissionDenied("setting a static tool list needs a platform admin or the server's owner")
	}
	list, err := s.store.SetStaticList(ctx, store.StaticList{ServerID: server, AudienceClass: class, TenantID: b.TenantID,
		Entries: entries, Schemas: schemas, SetBy: p.Subject, Reason: req.GetReason()}, req.GetExpectedVersion())
	if err != nil {
		return nil, translate(err)
	}
	return &discoveryv1.SetStaticToolListResponse{List: list}, nil
}

// GetStaticToolList implements the RPC.
func (s *Server) GetStaticToolList(ctx context.Context, req *discoveryv1.GetStaticToolListRequest) (*discoveryv1.GetStaticToolListResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	v := pairViolations(req)
	if err := v.Err(); err != nil {
		return nil, err
	}
	list, err := s.store.GetStaticList(ctx, req.GetServerId(), req.GetAudienceClass())
	if err == nil && !visible(p, list.GetTenantId()) {
		err = notFound(store.KindStaticList, store.PointerID(req.GetServerId(), req.GetAudienceClass()))
	}
	if err != nil {
		return nil, translate(err)
	}
	return &discoveryv1.GetStaticToolListResponse{List: list}, nil
}

// GetRunComparison implements the RPC.
func (s *Server) GetRunComparison(ctx context.Context, req *discoveryv1.GetRunComparisonRequest) (*discoveryv1.GetRunComparisonResponse, error) {
	p, err := principal.Require(ctx)
	if err != nil {
		return nil, err
	}
	var v apierror.Violations
	byRun := req.GetRunId() != ""
	var id string
	switch {
	case byRun && (req.GetServerId() != "" || req.GetAudienceClass() != "" || req.GetGeneration() != 0):
		v.Add("run_id", "give run_id, or server_id and audience_class (and generation), not both")
	case byRun:
		id = checkRunID(&v, "run_id", req.GetRunId())
	default:
		v = pairViolations(req)
		if req.GetGeneration() < 0 {
			v.Add("generation", "must not be negative")
		}
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	var c *discoveryv1.RunComparison
	if byRun {
		c, err = s.store.RunComparison(ctx, id)
		if err == nil && !visible(p, c.GetTenantId()) {
			err = notFound(store.KindComparison, id)
		}
	} else {
		c, err = s.store.LatestComparison(ctx, req.GetServerId(), req.GetAudienceClass(), req.GetGeneration())
		if err == nil && !visible(p, c.GetTenantId()) {
			err = notFound(store.KindComparison, store.PointerID(req.GetServerId(), req.GetAudienceClass()))
		}
	}
	if err != nil {
		return nil, translate(err)
	}
	cur, err := s.store.StaticListVersion(ctx, c.GetServerId(), c.GetAudienceClass())
	if err != nil {
		return nil, translate(err)
	}
	return &discoveryv1.GetRunComparisonResponse{Comparison: c, CurrentStaticListVersion: cur}, nil
}
