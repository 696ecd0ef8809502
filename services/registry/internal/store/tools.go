package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/principal"
	"github.com/toolcrib/toolcrib/services/registry/internal/contract"
	"github.com/toolcrib/toolcrib/services/registry/internal/review"

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
	if err := loadApprovals(ctx, q, list); err != nil {
		return nil, err
	}
	out := make(map[string]*toolRow, len(list))
	for _, t := range list {
		out[t.ID] = t
	}
	return out, nil
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

// evaluate recomputes the derived review status.
func (t *toolRow) evaluate() error {
	st, err := review.Evaluate(t.DescriptorDigest, t.Contract, t.Approvals)
	if err != nil {
		return err
	}
	t.ApprovalDigest, t.State = st.ApprovalDigest, st.State
	return nil
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
	if t.Contract != nil {
		p.Contract = t.Contract.Proto()
	}
	for _, a := range t.Approvals {
		p.Approvals = append(p.Approvals, &registryv1.ApprovedVersion{
			ApprovalDigest:   a.ApprovalDigest,
			DescriptorDigest: a.DescriptorDigest,
			Contract:         a.Contract.Proto(),
			ContractVersion:  a.ContractVersion,
			ApprovedBy:       a.ApprovedBy,
			ApprovedAt:       ts(a.ApprovedAt),
			Comment:          a.Comment,
		})
	}
	return p
}

// event returns a history entry for t as it is now.
func (t *toolRow) event(kind, actor, detail string) toolEvent {
	return toolEvent{toolID: t.ID, kind: kind, actor: actor, detail: detail,
		descriptorDigest: t.DescriptorDigest, contractVersion: t.ContractVersion, approvalDigest: t.ApprovalDigest}
}

// save writes t's mutable fields, bumping its version.
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
	return nil
}

// edit is one review action on a locked tool. It changes t and returns the
// history entries to record (kind and detail; the digests are filled in
// after re-evaluation), or none when nothing changed.
type edit func(u *unit, t *toolRow) ([]toolEvent, error)

// changeTool runs an owner-or-admin action on one tool: lock, check the
// actor, edit, re-evaluate the review status, save, bump the epoch of every
// tenant covering the tool's server, queue the change and its history.
func (s *Store) changeTool(ctx context.Context, actor principal.Principal, id, cause string, fn edit) (*registryv1.Tool, error) {
	var out *registryv1.Tool
	err := s.write(ctx, func(u *unit) error {
		t, err := lockTool(ctx, u.tx, id)
		if err != nil {
			return err
		}
		if !actor.Admin && !actor.Owns(t.Owner) {
			return &PermissionError{Message: fmt.Sprintf("only the tool's owner (%s) or a platform admin may change tool %q", t.Owner, id)}
		}
		events, err := fn(u, t)
		if err != nil {
			return err
		}
		if len(events) == 0 {
			out = t.proto()
			return nil
		}
		if err := t.evaluate(); err != nil {
			return err
		}
		if err := t.save(ctx, u.tx); err != nil {
			return err
		}
		for i := range events {
			ev := t.event(events[i].kind, actor.Subject, events[i].detail)
			ev.contract = events[i].contract
			events[i] = ev
		}
		tenants, err := affectedTenants(ctx, u.tx, t.ServerID)
		if err != nil {
			return err
		}
		if _, err := u.bump(ctx, tenants, cause); err != nil {
			return err
		}
		out = t.proto()
		u.emitTool(registryv1.ChangeKind_CHANGE_KIND_UPDATED, out, events)
		return nil
	})
	return out, err
}

// PublishContract makes c the tool's current contract, as a new contract
// version. It validates c against the tool's current descriptor
// ([InvalidError] with one violation per problem) and leaves the tool
// unreviewed unless an approval of the resulting digest is in force.
// [NotFoundError] when discovery has not committed the tool.
func (s *Store) PublishContract(ctx context.Context, actor principal.Principal, c *registryv1.ToolContract) (*registryv1.Tool, error) {
	return s.changeTool(ctx, actor, c.GetToolId(), "CONTRACT_PUBLISHED", func(u *unit, t *toolRow) ([]toolEvent, error) {
		if v := contract.Validate("contract", c, t.DescriptorRaw); len(v) > 0 {
			return nil, &InvalidError{Violations: v}
		}
		d := contract.FromProto(c)
		t.LatestContractVersion++
		t.Contract, t.ContractVersion = &d, t.LatestContractVersion
		return []toolEvent{{kind: EventPublished, contract: &d}}, nil
	})
}

// ApproveTool approves the tool's current approval digest, which must be
// digest: [PreconditionError] APPROVAL_DIGEST_STALE otherwise, NO_CONTRACT
// when none is published, CONTRACT_INVALID when the contract no longer
// holds for the current descriptor. Approving an approved digest changes
// nothing.
func (s *Store) ApproveTool(ctx context.Context, actor principal.Principal, id, digest, comment string) (*registryv1.Tool, error) {
	return s.changeTool(ctx, actor, id, "TOOL_APPROVED", func(u *unit, t *toolRow) ([]toolEvent, error) {
		if t.Contract == nil {
			return nil, &PreconditionError{Reason: "NO_CONTRACT", Message: fmt.Sprintf("tool %q has no published contract to approve", id)}
		}
		if digest != t.ApprovalDigest {
			return nil, &PreconditionError{Reason: "APPROVAL_DIGEST_STALE",
				Message: fmt.Sprintf("%s is not the current approval digest of tool %q: its descriptor or contract changed since you looked; "+
					"show the tool again and review what is current", digest, id)}
		}
		if t.State == registryv1.ReviewState_REVIEW_STATE_APPROVED {
			return nil, nil
		}
		if v := contract.Validate("contract", t.Contract.Proto(), t.DescriptorRaw); len(v) > 0 {
			return nil, &PreconditionError{Reason: "CONTRACT_INVALID",
				Message: "the contract no longer holds for the tool's current descriptor; publish a corrected contract", Violations: v}
		}
		c, err := t.Contract.Marshal()
		if err != nil {
			return nil, err
		}
		a := review.Approval{ApprovalDigest: digest, DescriptorDigest: t.DescriptorDigest, Contract: *t.Contract,
			ContractVersion: t.ContractVersion, ApprovedBy: actor.Subject, Comment: comment}
		if err := u.tx.QueryRow(ctx, `INSERT INTO approvals (tool_id, approval_digest, descriptor_digest, contract,
	contract_version, approved_by, comment) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING approval_id, approved_at`,
			id, a.ApprovalDigest, a.DescriptorDigest, c, a.ContractVersion, a.ApprovedBy, a.Comment).Scan(&a.ID, &a.ApprovedAt); err != nil {
			return nil, fmt.Errorf("write approval: %w", err)
		}
		t.Approvals = append([]review.Approval{a}, t.Approvals...)
		return []toolEvent{{kind: EventApproved, detail: comment}}, nil
	})
}

// SetEnabled enables or disables a tool (the kill switch). Setting the
// state a tool already has changes nothing.
func (s *Store) SetEnabled(ctx context.Context, actor principal.Principal, id string, enabled bool, reason string) (*registryv1.Tool, error) {
	cause, kind := "TOOL_DISABLED", EventDisabled
	if enabled {
		cause, kind, reason = "TOOL_ENABLED", EventEnabled, ""
	}
	return s.changeTool(ctx, actor, id, cause, func(u *unit, t *toolRow) ([]toolEvent, error) {
		if t.Enabled == enabled {
			return nil, nil
		}
		t.Enabled, t.DisabledReason = enabled, reason
		return []toolEvent{{kind: kind, detail: reason}}, nil
	})
}

// RollbackTool rolls the tool's contract back as [review.PlanRollback]
// says; [PreconditionError] with the plan's refusal reason when it cannot.
func (s *Store) RollbackTool(ctx context.Context, actor principal.Principal, id, reason string) (*registryv1.Tool, error) {
	return s.changeTool(ctx, actor, id, "TOOL_ROLLED_BACK", func(u *unit, t *toolRow) ([]toolEvent, error) {
		plan, err := review.PlanRollback(review.Status{ApprovalDigest: t.ApprovalDigest, State: t.State}, t.Contract, t.Approvals)
		var refusal *review.RollbackRefusal
		if errors.As(err, &refusal) {
			return nil, &PreconditionError{Reason: refusal.Reason, Message: refusal.Message}
		}
		if err != nil {
			return nil, err
		}
		detail := reason
		if plan.Withdraw != 0 {
			if _, err := u.tx.Exec(ctx, "UPDATE approvals SET withdrawn_at = now(), withdrawn_by = $2 WHERE approval_id = $1",
				plan.Withdraw, actor.Subject); err != nil {
				return nil, err
			}
			var kept []review.Approval
			for _, a := range t.Approvals {
				if a.ID == plan.Withdraw {
					detail = joinDetail(reason, "withdrew approval "+a.ApprovalDigest)
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

// GetTool returns one tool and, when history is set, its events oldest
// first. [NotFoundError] when unknown.
func (s *Store) GetTool(ctx context.Context, id string, history bool) (*registryv1.Tool, []*registryv1.ToolEvent, error) {
	var (
		tool   *registryv1.Tool
		events []*registryv1.ToolEvent
	)
	err := s.read(ctx, func(tx pgx.Tx) error {
		tools, err := loadTools(ctx, tx, []string{id}, false)
		if err != nil {
			return err
		}
		t, ok := tools[id]
		if !ok {
			return &NotFoundError{Kind: "tool", ID: id}
		}
		tool = t.proto()
		if !history {
			return nil
		}
		rows, err := tx.Query(ctx, `SELECT revision, kind, actor, at, descriptor_digest, contract_version, approval_digest,
	detail, contract FROM tool_events WHERE tool_id = $1 ORDER BY event_id`, id)
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
				&e.ApprovalDigest, &e.Detail, &c); err != nil {
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
		return err
	})
	return tool, events, err
}

// ToolFilter selects tools; zero fields match all.
type ToolFilter struct {
	ServerID string
	State    registryv1.ReviewState
}

// ListTools returns tools ordered by id, whether more follow, and the log
// revision the list was read at.
func (s *Store) ListTools(ctx context.Context, f ToolFilter, page Page) (tools []*registryv1.Tool, hasMore bool, rev int64, err error) {
	err = s.read(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, "SELECT "+toolCols+toolFrom+`WHERE t.tool_id > $1 AND ($2 = '' OR t.server_id = $2)
	AND ($3 = 0 OR t.review_state = $3) ORDER BY t.tool_id LIMIT $4`, page.After, f.ServerID, int16(f.State), page.Limit+1)
		if err != nil {
			return err
		}
		list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*toolRow, error) { return scanTool(r) })
		if err != nil {
			return err
		}
		list, hasMore = more(list, page.Limit)
		if err := loadApprovals(ctx, tx, list); err != nil {
			return err
		}
		for _, t := range list {
			tools = append(tools, t.proto())
		}
		rev, err = changelog.HeadTx(ctx, tx)
		return err
	})
	return tools, hasMore, rev, err
}
