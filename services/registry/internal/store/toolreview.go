package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/services/registry/internal/contract"
	"github.com/toolcrib/toolcrib/services/registry/internal/review"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// GetToolReview answers admission's question about tool id at descriptor
// digest, for an audience class: is that exact digest approved under the
// current contract, and is the tool enabled; with the contract, the
// approval and the class's tenant's policy epoch, all read in one
// REPEATABLE READ transaction. [NotFoundError] for an unknown tool or class,
// and, as a tool, when the class does not cover the tool's server or has
// no variant of the tool (it never saw the tool: to its tenant the tool
// does not exist). Who may ask for which class is the caller's to decide.
func (s *Store) GetToolReview(ctx context.Context, id, digest, class string) (*registryv1.GetToolReviewResponse, error) {
	var out *registryv1.GetToolReviewResponse
	err := s.read(ctx, func(tx pgx.Tx) error {
		var (
			tenantID string
			epoch    int64
		)
		err := tx.QueryRow(ctx, `SELECT c.tenant_id, t.policy_epoch FROM audience_classes c
JOIN tenants t ON t.tenant_id = c.tenant_id WHERE c.name = $1`, class).Scan(&tenantID, &epoch)
		if errors.Is(err, pgx.ErrNoRows) {
			return &NotFoundError{Kind: "audience class", ID: class}
		}
		if err != nil {
			return err
		}
		tools, err := loadTools(ctx, tx, []string{id}, false)
		if err != nil {
			return err
		}
		t, ok := tools[id]
		if !ok {
			return &NotFoundError{Kind: "tool", ID: id}
		}
		var (
			covers bool
			trust  int32
		)
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM audience_servers WHERE class_name = $1 AND server_id = $2),
	(SELECT trust_level FROM servers WHERE server_id = $2)`, class, t.ServerID).Scan(&covers, &trust); err != nil {
			return err
		}
		v := t.variant(class)
		if !covers || v == nil {
			return &NotFoundError{Kind: "tool", ID: id}
		}
		resp := &registryv1.GetToolReviewResponse{
			ToolId: t.ID, ServerId: t.ServerID, AudienceClass: class, TenantId: tenantID, PolicyEpoch: epoch,
			ReviewState: registryv1.ReviewState_REVIEW_STATE_PENDING_CONTRACT,
			Enabled:     t.Enabled, DisabledReason: t.DisabledReason, ContractVersion: t.ContractVersion,
			CurrentAtSource: v.Present && v.DescriptorDigest == digest,
			TrustLevel:      registryv1.TrustLevel(trust),
		}
		if t.Contract != nil {
			resp.Contract = t.Contract.Proto()
			ad, err := contract.ApprovalDigest(digest, *t.Contract)
			if err != nil {
				return err
			}
			resp.ApprovalDigest, resp.ReviewState = ad, registryv1.ReviewState_REVIEW_STATE_UNREVIEWED
			if a := review.Find(t.Approvals, ad); a != nil {
				resp.Approved, resp.ReviewState = true, registryv1.ReviewState_REVIEW_STATE_APPROVED
				resp.Approval = approvalProto(*a)
			}
		}
		resp.Revision, err = changelog.HeadTx(ctx, tx)
		out = resp
		return err
	})
	return out, err
}
