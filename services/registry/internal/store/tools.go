package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/registry/internal/contract"
	"github.com/toolcrib/toolcrib/services/registry/internal/review"
	"github.com/toolcrib/toolcrib/services/registry/reason"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// Tool event kinds (ToolEvent.kind).
const (
	EventDiscovered        = "DISCOVERED"
	EventDescriptorChanged = "DESCRIPTOR_CHANGED"
	EventRemovedAtSource   = "REMOVED_AT_SOURCE"
	EventRestoredAtSource  = "RESTORED_AT_SOURCE"
	EventPublished         = "PUBLISHED"
	EventApproved          = "APPROVED"
	EventEnabled           = "ENABLED"
	EventDisabled          = "DISABLED"
	EventRolledBack        = "ROLLED_BACK"
)

// DiscoveryActor is the actor of changes seen at the source.
const DiscoveryActor = "discovery"

// toolRow is a tool as stored, with its approvals in force (newest first).
type toolRow struct {
	ID                    string
	ServerID              string
	Name                  string
	Owner                 string
	State                 registryv1.ReviewState
	Enabled               bool
	DisabledReason        string
	DescriptorDigest      string
	DescriptorRaw         []byte
	Present               bool
	Contract              *contract.Doc
	ContractVersion       int64
	LatestContractVersion int64
	ApprovalDigest        string
	Version               int64
	UpdatedAt             time.Time
	Approvals             []review.Approval
	// Variants are the tool's variants, one per audience class that listed
	// it, ordered by class.
	Variants []*variantRow
}

const toolCols = `t.tool_id, t.server_id, t.name, s.owner, t.review_state, t.enabled, t.disabled_reason,
	t.descriptor_digest, t.descriptor_raw, t.present_at_source, t.contract, t.contract_version,
	t.latest_contract_version, t.approval_digest, t.version, t.updated_at`

const toolFrom = ` FROM tools t JOIN servers s ON s.server_id = t.server_id `

func scanTool(row pgx.Row) (*toolRow, error) {
	var (
		t     toolRow
		state int16
		c     []byte
	)
	if err := row.Scan(&t.ID, &t.ServerID, &t.Name, &t.Owner, &state, &t.Enabled, &t.DisabledReason,
		&t.DescriptorDigest, &t.DescriptorRaw, &t.Present, &c, &t.ContractVersion,
		&t.LatestContractVersion, &t.ApprovalDigest, &t.Version, &t.UpdatedAt); err != nil {
		return nil, err
	}
	t.State = registryv1.ReviewState(state)
	if c != nil {
		d, err := contract.Unmarshal(c)
		if err != nil {
			return nil, err
		}
		t.Contract = &d
	}
	return &t, nil
}

// loadTools reads tools by id (locking them, in id order, when lock is
// set) with their approvals.
func loadTools(ctx context.Context, q querier, ids []string, lock bool) (map[string]*toolRow, error) {
	sql := "SELECT " + toolCols + toolFrom + "WHERE t.tool_id = ANY($1) ORDER BY t.tool_id"
	if lock {
		sql += " FOR UPDATE OF t"
	}
	rows, err := q.Query(ctx, sql, ids)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*toolRow, error) { return scanTool(r) })
	if err != nil {
		return nil, err
	}
	if err := loadDetails(ctx, q, list); err != nil {
		return nil, err
	}
	out := make(map[string]*toolRow, len(list))
	for _, t := range list {
		out[t.ID] = t
	}
	return out, nil
}

// loadDetails reads the approvals and variants of tools and evaluates
// them: the derived review states are always recomputed from the facts,
// never trusted as stored.
func loadDetails(ctx context.Context, q querier, tools []*toolRow) error {
	if err := loadApprovals(ctx, q, tools); err != nil {
		return err
	}
	if err := loadVariants(ctx, q, tools); err != nil {
		return err
	}
	for _, t := range tools {
		if err := t.evaluate(); err != nil {
			return err
		}
	}
	return nil
}

func loadApprovals(ctx context.Context, q querier, tools []*toolRow) error {
	if len(tools) == 0 {
		return nil
	}
	byID := map[string]*toolRow{}
	ids := make([]string, len(tools))
	for i, t := range tools {
		byID[t.ID], ids[i] = t, t.ID
	}
	rows, err := q.Query(ctx, `SELECT tool_id, approval_id, approval_digest, descriptor_digest, contract, contract_version,
	approved_by, approved_at, comment FROM approvals
WHERE tool_id = ANY($1) AND withdrawn_at IS NULL ORDER BY approval_id DESC`, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			toolID string
			a      review.Approval
			c      []byte
		)
		if err := rows.Scan(&toolID, &a.ID, &a.ApprovalDigest, &a.DescriptorDigest, &c, &a.ContractVersion,
			&a.ApprovedBy, &a.ApprovedAt, &a.Comment); err != nil {
			return err
		}
		if a.Contract, err = contract.Unmarshal(c); err != nil {
			return err
		}
		byID[toolID].Approvals = append(byID[toolID].Approvals, a)
	}
	return rows.Err()
}

func lockTool(ctx context.Context, q querier, id string) (*toolRow, error) {
	tools, err := loadTools(ctx, q, []string{id}, true)
	if err != nil {
		return nil, err
	}
	t, ok := tools[id]
	if !ok {
		return nil, &NotFoundError{Kind: "tool", ID: id}
	}
	return t, nil
}

// evaluate recomputes the derived review status of every variant, and the
// deprecated tool-level fields from the primary variant (a tool without
// variants keeps its stored descriptor).
func (t *toolRow) evaluate() error {
	for _, v := range t.Variants {
		st, err := review.Evaluate(v.DescriptorDigest, t.Contract, t.Approvals)
		if err != nil {
			return err
		}
		v.ApprovalDigest, v.State = st.ApprovalDigest, st.State
	}
	if p := primary(t.Variants); p != nil {
		t.DescriptorDigest, t.DescriptorRaw = p.DescriptorDigest, p.DescriptorRaw
		t.Present = slices.ContainsFunc(t.Variants, func(v *variantRow) bool { return v.Present })
	}
	st, err := review.Evaluate(t.DescriptorDigest, t.Contract, t.Approvals)
	if err != nil {
		return err
	}
	t.ApprovalDigest, t.State = st.ApprovalDigest, st.State
	return nil
}

// statuses returns the review status of every variant.
func (t *toolRow) statuses() []review.Status {
	out := make([]review.Status, len(t.Variants))
	for i, v := range t.Variants {
		out[i] = review.Status{ApprovalDigest: v.ApprovalDigest, State: v.State}
	}
	return out
}

func (t *toolRow) proto() *registryv1.Tool {
	p := &registryv1.Tool{
		ToolId:           t.ID,
		ServerId:         t.ServerID,
		Name:             t.Name,
		Owner:            t.Owner,
		ReviewState:      t.State,
		Enabled:          t.Enabled,
		DescriptorDigest: t.DescriptorDigest,
		DescriptorRaw:    t.DescriptorRaw,
		PresentAtSource:  t.Present,
		ContractVersion:  t.ContractVersion,
		ApprovalDigest:   t.ApprovalDigest,
		Version:          t.Version,
		UpdatedAt:        ts(t.UpdatedAt),
		DisabledReason:   t.DisabledReason,
	}
	for _, v := range t.Variants {
		p.Variants = append(p.Variants, v.proto())
	}
	if t.Contract != nil {
		p.Contract = t.Contract.Proto()
	}
	for _, a := range t.Approvals {
		p.Approvals = append(p.Approvals, approvalProto(a))
	}
	return p
}

func approvalProto(a review.Approval) *registryv1.ApprovedVersion {
	return &registryv1.ApprovedVersion{
		ApprovalDigest:   a.ApprovalDigest,
		DescriptorDigest: a.DescriptorDigest,
		Contract:         a.Contract.Proto(),
		ContractVersion:  a.ContractVersion,
		ApprovedBy:       a.ApprovedBy,
		ApprovedAt:       ts(a.ApprovedAt),
		Comment:          a.Comment,
	}
}

// event returns a history entry for t as it is now.
func (t *toolRow) event(kind, actor, detail string) toolEvent {
	return toolEvent{toolID: t.ID, kind: kind, actor: actor, detail: detail,
		descriptorDigest: t.DescriptorDigest, contractVersion: t.ContractVersion, approvalDigest: t.ApprovalDigest}
}

// variantEvent returns a history entry for a change at the source of v.
func (t *toolRow) variantEvent(v *variantRow, kind, detail string) toolEvent {
	return toolEvent{toolID: t.ID, kind: kind, actor: DiscoveryActor, detail: detail, audienceClass: v.Class,
		descriptorDigest: v.DescriptorDigest, contractVersion: t.ContractVersion, approvalDigest: v.ApprovalDigest}
}

// save writes t's mutable fields and its variants, bumping its version.
func (t *toolRow) save(ctx context.Context, tx pgx.Tx) error {
	c, err := jsonOrNil(t.Contract)
	if err != nil {
		return err
	}
	err = tx.QueryRow(ctx, `UPDATE tools SET review_state = $2, enabled = $3, disabled_reason = $4, descriptor_digest = $5,
	descriptor_raw = $6, present_at_source = $7, contract = $8, contract_version = $9, latest_contract_version = $10,
	approval_digest = $11, version = version + 1, updated_at = now()
WHERE tool_id = $1 RETURNING version, updated_at`, t.ID, int16(t.State), t.Enabled, t.DisabledReason, t.DescriptorDigest,
		t.DescriptorRaw, t.Present, c, t.ContractVersion, t.LatestContractVersion, t.ApprovalDigest).Scan(&t.Version, &t.UpdatedAt)
	if err != nil {
		return fmt.Errorf("save tool %s: %w", t.ID, err)
	}
	return t.saveVariants(ctx, tx)
}

// edit is one review action on a locked tool t, of which the actor sees
// visible (t itself for admins). It changes t and returns the history
// entries to record (kind and detail; the digests are filled in after
// re-evaluation unless set), or none when nothing changed.
type edit func(u *unit, t, visible *toolRow) ([]toolEvent, error)

// changeTool runs an owner-or-admin action on one tool: lock, check that
// the actor sees the tool ([NotFoundError] otherwise, as for a missing
// tool) and owns it, edit, re-evaluate the review status, save, bump the
// epoch of every tenant covering the tool's server, queue the change and
// its history. The tool returned is what the actor's view shows.
func (s *Store) changeTool(ctx context.Context, actor principal.Principal, view View, id string, cause registryv1.PolicyChangeCause, fn edit) (*registryv1.Tool, error) {
	var out *registryv1.Tool
	err := s.write(ctx, func(u *unit) error {
		t, err := lockTool(ctx, u.tx, id)
		if err != nil {
			return err
		}
		sc, err := view.resolve(ctx, u.tx)
		if err != nil {
			return err
		}
		visible, ok, err := sc.filter(t)
		if err != nil {
			return err
		}
		if !ok {
			return &NotFoundError{Kind: "tool", ID: id}
		}
		if !actor.Admin && !actor.Owns(t.Owner) {
			return &PermissionError{Message: fmt.Sprintf("only the tool's owner (%s) or a platform admin may change tool %q", t.Owner, id)}
		}
		events, err := fn(u, t, visible)
		if err != nil {
			return err
		}
		if len(events) > 0 {
			if err := t.evaluate(); err != nil {
				return err
			}
			if err := t.save(ctx, u.tx); err != nil {
				return err
			}
			for i := range events {
				ev := t.event(events[i].kind, actor.Subject, events[i].detail)
				ev.contract = events[i].contract
				if events[i].descriptorDigest != "" {
					ev.descriptorDigest, ev.approvalDigest = events[i].descriptorDigest, events[i].approvalDigest
				}
				events[i] = ev
			}
			tenants, err := affectedTenants(ctx, u.tx, t.ServerID)
			if err != nil {
				return err
			}
			if _, err := u.bump(ctx, tenants, cause); err != nil {
				return err
			}
			u.emitTool(registryv1.ChangeKind_CHANGE_KIND_UPDATED, t.proto(), events)
		}
		if visible, _, err = sc.filter(t); err != nil {
			return err
		}
		out = visible.proto()
		return nil
	})
	return out, err
}

// PublishContract makes c the tool's current contract, as a new contract
// version. It validates c against every descriptor of the variants the
// actor sees (those present at the source, or all of them when none is):
// [InvalidError] with one violation per problem. Every variant is then
// unreviewed unless an approval of its resulting digest is in force; each
// variant's own descriptor is checked again when it is approved.
// [NotFoundError] when discovery has not committed the tool, or the actor
// does not see it.
func (s *Store) PublishContract(ctx context.Context, actor principal.Principal, view View, c *registryv1.ToolContract) (*registryv1.Tool, error) {
	return s.changeTool(ctx, actor, view, c.GetToolId(), registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_CONTRACT_PUBLISHED, func(u *unit, t, visible *toolRow) ([]toolEvent, error) {
		if v := validateForVariants(c, visible); len(v) > 0 {
			return nil, &InvalidError{Violations: v}
		}
		d := contract.FromProto(c)
		t.LatestContractVersion++
		t.Contract, t.ContractVersion = &d, t.LatestContractVersion
		return []toolEvent{{kind: EventPublished, contract: &d}}, nil
	})
}

// validateForVariants validates c against each distinct descriptor of t's
// variants present at the source (of all of them when none is present; of
// the tool's own descriptor when it has none), one violation per problem.
func validateForVariants(c *registryv1.ToolContract, t *toolRow) apierror.Violations {
	var raws [][]byte
	seen := map[string]bool{}
	for _, present := range []bool{true, false} {
		for _, v := range t.Variants {
			if (v.Present || !present) && !seen[v.DescriptorDigest] {
				seen[v.DescriptorDigest] = true
				raws = append(raws, v.DescriptorRaw)
			}
		}
		if len(raws) > 0 {
			break
		}
	}
	if len(raws) == 0 {
		raws = [][]byte{t.DescriptorRaw}
	}
	var out apierror.Violations
	reported := map[apierror.FieldViolation]bool{}
	for _, raw := range raws {
		for _, fv := range contract.Validate("contract", c, raw) {
			if !reported[fv] {
				reported[fv] = true
				out = append(out, fv)
			}
		}
	}
	return out
}

// ApproveTool approves digest, which must be the current approval digest
// of a variant the actor sees: [PreconditionError] APPROVAL_DIGEST_STALE
// otherwise, NO_CONTRACT when none is published, CONTRACT_INVALID when the
// contract does not hold for that variant's descriptor. The approval binds
// that descriptor and the current contract, so it covers every class that
// sees the same descriptor and no other. Approving an approved digest
// changes nothing.
func (s *Store) ApproveTool(ctx context.Context, actor principal.Principal, view View, id, digest, comment string) (*registryv1.Tool, error) {
	return s.changeTool(ctx, actor, view, id, registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_TOOL_APPROVED, func(u *unit, t, visible *toolRow) ([]toolEvent, error) {
		if t.Contract == nil {
			return nil, &PreconditionError{Reason: reason.NoContract, Message: fmt.Sprintf("tool %q has no published contract to approve", id)}
		}
		var target *variantRow
		for _, v := range visible.Variants {
			if v.ApprovalDigest == digest {
				target = v
				break
			}
		}
		if target == nil {
			return nil, &PreconditionError{Reason: reason.ApprovalDigestStale,
				Message: fmt.Sprintf("%s is not the current approval digest of any variant of tool %q: its descriptor or contract "+
					"changed since you looked; show the tool again and review what is current", digest, id)}
		}
		if target.State == registryv1.ReviewState_REVIEW_STATE_APPROVED {
			return nil, nil
		}
		if v := contract.Validate("contract", t.Contract.Proto(), target.DescriptorRaw); len(v) > 0 {
			return nil, &PreconditionError{Reason: reason.ContractInvalid,
				Message: "the contract does not hold for this variant's descriptor; publish a corrected contract", Violations: v}
		}
		c, err := t.Contract.Marshal()
		if err != nil {
			return nil, err
		}
		a := review.Approval{ApprovalDigest: digest, DescriptorDigest: target.DescriptorDigest, Contract: *t.Contract,
			ContractVersion: t.ContractVersion, ApprovedBy: actor.Subject, Comment: comment}
		if err := u.tx.QueryRow(ctx, `INSERT INTO approvals (tool_id, approval_digest, descriptor_digest, contract,
	contract_version, approved_by, comment) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING approval_id, approved_at`,
			id, a.ApprovalDigest, a.DescriptorDigest, c, a.ContractVersion, a.ApprovedBy, a.Comment).Scan(&a.ID, &a.ApprovedAt); err != nil {
			return nil, fmt.Errorf("write approval: %w", err)
		}
		t.Approvals = append([]review.Approval{a}, t.Approvals...)
		return []toolEvent{{kind: EventApproved, detail: comment, descriptorDigest: a.DescriptorDigest, approvalDigest: digest}}, nil
	})
}

// SetEnabled enables or disables a tool (the kill switch). Setting the
// state a tool already has changes nothing.
func (s *Store) SetEnabled(ctx context.Context, actor principal.Principal, view View, id string, enabled bool, reason string) (*registryv1.Tool, error) {
	cause, kind := registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_TOOL_DISABLED, EventDisabled
	if enabled {
		cause, kind, reason = registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_TOOL_ENABLED, EventEnabled, ""
	}
	return s.changeTool(ctx, actor, view, id, cause, func(u *unit, t, _ *toolRow) ([]toolEvent, error) {
		if t.Enabled == enabled {
			return nil, nil
		}
		t.Enabled, t.DisabledReason = enabled, reason
		return []toolEvent{{kind: kind, detail: reason}}, nil
	})
}

// RollbackTool rolls the tool's contract back as [review.PlanRollback]
// says, over the statuses of all its variants (the contract is the whole
// tool's); [PreconditionError] with the plan's refusal reason when it
// cannot.
func (s *Store) RollbackTool(ctx context.Context, actor principal.Principal, view View, id, reason string) (*registryv1.Tool, error) {
	return s.changeTool(ctx, actor, view, id, registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_TOOL_ROLLED_BACK, func(u *unit, t, _ *toolRow) ([]toolEvent, error) {
		statuses := t.statuses()
		if len(statuses) == 0 {
			statuses = []review.Status{{ApprovalDigest: t.ApprovalDigest, State: t.State}}
		}
		plan, err := review.PlanRollback(statuses, t.Contract, t.Approvals)
		var refusal *review.RollbackRefusal
		if errors.As(err, &refusal) {
			return nil, &PreconditionError{Reason: refusal.Reason, Message: refusal.Message}
		}
		if err != nil {
			return nil, err
		}
		detail := reason
		if len(plan.Withdraw) > 0 {
			if _, err := u.tx.Exec(ctx, "UPDATE approvals SET withdrawn_at = now(), withdrawn_by = $2 WHERE approval_id = ANY($1)",
				plan.Withdraw, actor.Subject); err != nil {
				return nil, err
			}
			var kept []review.Approval
			for _, a := range t.Approvals {
				if slices.Contains(plan.Withdraw, a.ID) {
					detail = joinDetail(detail, "withdrew approval "+a.ApprovalDigest)
					continue
				}
				kept = append(kept, a)
			}
			t.Approvals = kept
		}
		c := plan.Restore.Contract
		t.Contract, t.ContractVersion = &c, plan.Restore.ContractVersion
		return []toolEvent{{kind: EventRolledBack, detail: detail, contract: &c}}, nil
	})
}

func joinDetail(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// GetTool returns one tool as view shows it and, when history is set, its
// events oldest first, as the view shows them. [NotFoundError] when unknown
// or not visible: the two are indistinguishable.
func (s *Store) GetTool(ctx context.Context, view View, id string, history bool) (*registryv1.Tool, []*registryv1.ToolEvent, error) {
	var (
		tool   *registryv1.Tool
		events []*registryv1.ToolEvent
	)
	err := s.read(ctx, func(tx pgx.Tx) error {
		tools, err := loadTools(ctx, tx, []string{id}, false)
		if err != nil {
			return err
		}
		full, ok := tools[id]
		if !ok {
			return &NotFoundError{Kind: "tool", ID: id}
		}
		sc, err := view.resolve(ctx, tx)
		if err != nil {
			return err
		}
		t, ok, err := sc.filter(full)
		if err != nil {
			return err
		}
		if !ok {
			return &NotFoundError{Kind: "tool", ID: id}
		}
		tool = t.proto()
		if !history {
			return nil
		}
		rows, err := tx.Query(ctx, `SELECT revision, kind, actor, at, descriptor_digest, contract_version, approval_digest,
	detail, contract, audience_class FROM tool_events WHERE tool_id = $1 ORDER BY event_id`, id)
		if err != nil {
			return err
		}
		events, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (*registryv1.ToolEvent, error) {
			var (
				e  registryv1.ToolEvent
				at time.Time
				c  []byte
			)
			if err := r.Scan(&e.Revision, &e.Kind, &e.Actor, &at, &e.DescriptorDigest, &e.ContractVersion,
				&e.ApprovalDigest, &e.Detail, &c, &e.AudienceClass); err != nil {
				return nil, err
			}
			e.At = ts(at)
			if c != nil {
				d, err := contract.Unmarshal(c)
				if err != nil {
					return nil, err
				}
				e.Contract = d.Proto()
			}
			return &e, nil
		})
		events = sc.filterHistory(full, events)
		return err
	})
	return tool, events, err
}

// ToolFilter selects tools; zero fields match all.
type ToolFilter struct {
	ServerID string
	// State matches a tool with a visible variant in that state.
	State registryv1.ReviewState
}

// ListTools returns the tools view shows, ordered by id, whether more
// follow, and the log revision the list was read at.
func (s *Store) ListTools(ctx context.Context, view View, f ToolFilter, page Page) (tools []*registryv1.Tool, hasMore bool, rev int64, err error) {
	err = s.read(ctx, func(tx pgx.Tx) error {
		// A tool is listed when a variant the view sees matches the state
		// (for admins also a tool without variants, by its own state).
		rows, err := tx.Query(ctx, "SELECT "+toolCols+toolFrom+`WHERE t.tool_id > $1 AND ($2 = '' OR t.server_id = $2)
	AND (($5 AND ($3 = 0 OR t.review_state = $3)) OR EXISTS (SELECT 1 FROM tool_variants v WHERE v.tool_id = t.tool_id
		AND ($3 = 0 OR v.review_state = $3)
		AND ($5 OR v.audience_class IN (SELECT a.class_name FROM audience_servers a JOIN audience_classes c ON c.name = a.class_name
			WHERE a.server_id = t.server_id AND c.tenant_id = $6))))
	ORDER BY t.tool_id LIMIT $4`, page.After, f.ServerID, int16(f.State), page.Limit+1, view.All, view.Tenant)
		if err != nil {
			return err
		}
		list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*toolRow, error) { return scanTool(r) })
		if err != nil {
			return err
		}
		list, hasMore = more(list, page.Limit)
		if err := loadDetails(ctx, tx, list); err != nil {
			return err
		}
		sc, err := view.resolve(ctx, tx)
		if err != nil {
			return err
		}
		for _, full := range list {
			t, ok, err := sc.filter(full)
			if err != nil {
				return err
			}
			if ok {
				tools = append(tools, t.proto())
			}
		}
		rev, err = changelog.HeadTx(ctx, tx)
		return err
	})
	return tools, hasMore, rev, err
}
