package web

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/services/console/internal/diff"
)

// descriptor is the part of a raw MCP tool object a reviewer reads.
type descriptor struct {
	Name        string                     `json:"name"`
	Title       string                     `json:"title"`
	Description string                     `json:"description"`
	Input       json.RawMessage            `json:"inputSchema"`
	Output      json.RawMessage            `json:"outputSchema"`
	Annotations map[string]json.RawMessage `json:"annotations"`
}

func parseDescriptor(raw []byte) descriptor {
	var d descriptor
	_ = json.Unmarshal(raw, &d) // discovery validated it; a bad one shows empty
	return d
}

// kv is one displayed key and value.
type kv struct{ Key, Value string }

// contractRow is one contract field, approved and now.
type contractRow struct {
	Field, Approved, Current string
	Changed                  bool
}

// reviewItem is one approval digest awaiting review, with its diff.
type reviewItem struct {
	ApprovalDigest, DescriptorDigest string
	// Classes are the audience classes whose variant has this digest.
	Classes    []string
	Generation int64
	// Prev is the last approved descriptor; nil when there is none or it
	// is no longer retained (PrevNote says which).
	Prev               *descriptor
	PrevDigest         string
	PrevNote           string
	Cur                descriptor
	DescriptionDiff    []diff.Span
	TitleOld, TitleNew string
	Input, Output      diff.SchemaDiff
	InputNew           string
	OutputNew          string
	Contract           []contractRow
	Annotations        []kv
	Flags              []string
}

// reviewPage is the review page's data.
type reviewPage struct {
	Tool       *registryv1.Tool
	Items      []reviewItem
	Pending    []string // classes still without a contract
	CanApprove bool
}

// maxGenerationsSearched and maxSnapshotPages bound the search for the
// approved descriptor in older generations.
const (
	maxGenerationsSearched = 20
	maxSnapshotPages       = 20
	snapshotPageSize       = 1000
)

// buildReview reads what the review of tool shows, with the user's token.
func (s *Server) buildReview(ctx context.Context, call grpc.CallOption, t *registryv1.Tool, history []*registryv1.ToolEvent) reviewPage {
	rp := reviewPage{Tool: t}
	byDigest := map[string]int{}
	for _, v := range t.GetVariants() {
		switch v.GetReviewState() {
		case registryv1.ReviewState_REVIEW_STATE_PENDING_CONTRACT:
			rp.Pending = append(rp.Pending, v.GetAudienceClass())
			continue
		case registryv1.ReviewState_REVIEW_STATE_APPROVED:
			continue
		}
		if v.GetApprovalDigest() == "" {
			continue
		}
		if i, ok := byDigest[v.GetApprovalDigest()]; ok {
			rp.Items[i].Classes = append(rp.Items[i].Classes, v.GetAudienceClass())
			continue
		}
		byDigest[v.GetApprovalDigest()] = len(rp.Items)
		rp.Items = append(rp.Items, s.reviewItem(ctx, call, t, v, history))
	}
	return rp
}

func (s *Server) reviewItem(ctx context.Context, call grpc.CallOption, t *registryv1.Tool, v *registryv1.ToolVariant, history []*registryv1.ToolEvent) reviewItem {
	it := reviewItem{ApprovalDigest: v.GetApprovalDigest(), DescriptorDigest: v.GetDescriptorDigest(),
		Classes: []string{v.GetAudienceClass()}, Generation: v.GetGeneration(), Cur: parseDescriptor(v.GetDescriptorRaw())}
	// The descriptor as discovery recorded it: its content flags.
	if d, err := s.descriptorAt(ctx, call, t.GetServerId(), v.GetAudienceClass(), v.GetGeneration(), t.GetName(), ""); err == nil && d != nil {
		it.Flags = d.GetFlags()
	}
	for k, val := range it.Cur.Annotations {
		it.Annotations = append(it.Annotations, kv{k, string(val)})
	}
	sort.Slice(it.Annotations, func(i, j int) bool { return it.Annotations[i].Key < it.Annotations[j].Key })

	last, approvedContract := lastApproval(history)
	switch {
	case last == nil:
		it.PrevNote = "Never approved: the whole descriptor is new to review."
	default:
		it.PrevDigest = last.GetDescriptorDigest()
		if last.GetDescriptorDigest() == v.GetDescriptorDigest() {
			cur := it.Cur
			it.Prev = &cur
			it.PrevNote = "The descriptor is the approved one; the contract changed."
		} else if d, err := s.findApproved(ctx, call, t.GetServerId(), v.GetAudienceClass(), t.GetName(), last.GetDescriptorDigest()); err == nil && d != nil {
			prev := parseDescriptor(d.GetRaw())
			it.Prev = &prev
		} else {
			it.PrevNote = "The approved descriptor is no longer retained by discovery: the current one is shown whole."
		}
	}
	var old descriptor
	if it.Prev != nil {
		old = *it.Prev
	}
	it.DescriptionDiff = diff.Text(old.Description, it.Cur.Description)
	it.TitleOld, it.TitleNew = old.Title, it.Cur.Title
	it.Input = diff.Schema(old.Input, it.Cur.Input)
	it.Output = diff.Schema(old.Output, it.Cur.Output)
	it.InputNew, it.OutputNew = prettyJSON(it.Cur.Input), prettyJSON(it.Cur.Output)
	it.Contract = contractRows(approvedContract, t.GetContract())
	return it
}

// Tool event kinds read here (registry.proto, ToolEvent.kind).
const (
	eventApproved  = "APPROVED"
	eventPublished = "PUBLISHED"
)

// lastApproval is the newest approval in the tool's history (oldest
// first) whose descriptor the caller may see, and the contract it
// approved (that of the PUBLISHED event of its contract version). The
// history, not Tool.approvals: for a tenant principal the registry lists
// only the approvals of descriptors its classes see now, so the approval
// of the version a change replaced is there only as an event.
func lastApproval(history []*registryv1.ToolEvent) (*registryv1.ToolEvent, *registryv1.ToolContract) {
	var last *registryv1.ToolEvent
	for _, e := range history {
		if e.GetKind() == eventApproved && e.GetDescriptorDigest() != "" {
			last = e
		}
	}
	if last == nil {
		return nil, nil
	}
	var contract *registryv1.ToolContract
	for _, e := range history {
		if e.GetKind() == eventPublished && e.GetContractVersion() == last.GetContractVersion() {
			contract = e.GetContract()
		}
	}
	return last, contract
}

// descriptorAt returns tool name's descriptor in one generation of
// (server, class) (the active one for generation 0); with digest set, only
// a descriptor of that digest. nil when absent.
func (s *Server) descriptorAt(ctx context.Context, call grpc.CallOption, server, class string, gen int64, name, digest string) (*catalogv1.ToolDescriptor, error) {
	token := ""
	for range maxSnapshotPages {
		resp, err := s.o.Discovery.GetSnapshot(ctx, &discoveryv1.GetSnapshotRequest{ServerId: server, AudienceClass: class,
			Generation: gen, ToolsPageSize: snapshotPageSize, ToolsPageToken: token}, call)
		if err != nil {
			return nil, err
		}
		for _, d := range resp.GetSnapshot().GetTools() {
			if d.GetName() == name && (digest == "" || d.GetDescriptorDigest() == digest) {
				return d, nil
			}
		}
		token = resp.GetNextToolsPageToken()
		if token == "" {
			return nil, nil
		}
	}
	return nil, nil
}

// findApproved looks for the descriptor of digest in the retained
// generations of (server, class), newest first.
func (s *Server) findApproved(ctx context.Context, call grpc.CallOption, server, class, name, digest string) (*catalogv1.ToolDescriptor, error) {
	gens, err := s.o.Discovery.ListGenerations(ctx, &discoveryv1.ListGenerationsRequest{ServerId: server, AudienceClass: class,
		PageSize: maxGenerationsSearched}, call)
	if err != nil {
		return nil, err
	}
	for _, g := range gens.GetGenerations() {
		d, err := s.descriptorAt(ctx, call, server, class, g.GetGeneration(), name, digest)
		if err == nil && d != nil {
			return d, nil
		}
	}
	return nil, nil
}

// contractRows lists the contract's fields, approved and now.
func contractRows(approved, cur *registryv1.ToolContract) []contractRow {
	row := func(field string, f func(*registryv1.ToolContract) string) contractRow {
		a, c := "—", "—"
		if approved != nil {
			a = f(approved)
		}
		if cur != nil {
			c = f(cur)
		}
		return contractRow{Field: field, Approved: a, Current: c, Changed: approved != nil && a != c}
	}
	list := func(l []string) string {
		if len(l) == 0 {
			return "(none)"
		}
		return strings.Join(l, ", ")
	}
	return []contractRow{
		row("effect", func(c *registryv1.ToolContract) string { return enumName(c.GetEffect()) }),
		row("scope", func(c *registryv1.ToolContract) string { return c.GetScope() }),
		row("authorization", func(c *registryv1.ToolContract) string { return enumName(c.GetAuthorization()) }),
		row("confirmation", func(c *registryv1.ToolContract) string { return enumName(c.GetConfirmation()) }),
		row("deadline", func(c *registryv1.ToolContract) string { return fmt.Sprintf("%d ms", c.GetDeadlineMs()) }),
		row("allowed fields", func(c *registryv1.ToolContract) string { return list(c.GetAllowedFields()) }),
		row("required evidence", func(c *registryv1.ToolContract) string { return list(c.GetRequiredEvidence()) }),
		row("downstream mapping", func(c *registryv1.ToolContract) string { return protoText(c.GetDownstreamMapping()) }),
		row("data policy", func(c *registryv1.ToolContract) string { return protoText(c.GetDataPolicy()) }),
		row("result budget", func(c *registryv1.ToolContract) string { return fmt.Sprintf("%d bytes", c.GetResultBudgetBytes()) }),
		row("sampling", func(c *registryv1.ToolContract) string {
			if c.GetAllowSampling() {
				return "allowed: the server may ask the caller's model through the gateway"
			}
			return "refused"
		}),
	}
}

// protoText is a small message as compact JSON; "(none)" when unset.
func protoText(m proto.Message) string {
	if m == nil || !m.ProtoReflect().IsValid() {
		return "(none)"
	}
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil || string(b) == "{}" {
		return "(none)"
	}
	return string(b)
}

// canManage: the tool's owner or a platform admin (the registry decides;
// this only hides buttons that would be refused).
func canManage(q *req, owner string) bool { return q.p.Admin || q.p.Owns(owner) }
