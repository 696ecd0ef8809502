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

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// PutTenant creates a tenant at policy epoch 1, or updates its display
// name. It does not bump the epoch: a name changes no decision.
func (s *Store) PutTenant(ctx context.Context, t *registryv1.Tenant) (*registryv1.Tenant, error) {
	var out *registryv1.Tenant
	err := s.write(ctx, func(u *unit) error {
		var (
			res       registryv1.Tenant
			createdAt time.Time
			inserted  bool
		)
		err := u.tx.QueryRow(ctx, `INSERT INTO tenants (tenant_id, display_name) VALUES ($1, $2)
ON CONFLICT (tenant_id) DO UPDATE SET display_name = EXCLUDED.display_name
RETURNING tenant_id, display_name, policy_epoch, created_at, xmax = 0`, t.GetTenantId(), t.GetDisplayName()).
			Scan(&res.TenantId, &res.DisplayName, &res.PolicyEpoch, &createdAt, &inserted)
		if err != nil {
			return err
		}
		res.CreatedAt = ts(createdAt)
		out = &res
		kind := registryv1.ChangeKind_CHANGE_KIND_UPDATED
		if inserted {
			kind = registryv1.ChangeKind_CHANGE_KIND_CREATED
		}
		u.emitTenant(kind, out)
		return nil
	})
	return out, err
}

// GrantChange names a grant and what to add to or remove from it.
type GrantChange struct {
	TenantID string
	// Subject or Group; exactly one is set.
	Subject string
	Group   string
	// Scopes and AudienceClasses to add or remove.
	Scopes          []string
	AudienceClasses []string
	// SetCondition replaces the grant's condition with Condition (empty
	// clears it); only for [Store.Grant]. The caller has compiled
	// Condition (platform/condition); the store keeps the text.
	SetCondition bool
	Condition    string
}

func (g GrantChange) id() string {
	if g.Group != "" {
		return g.TenantID + "/group:" + g.Group
	}
	return g.TenantID + "/" + g.Subject
}

// Grant adds scopes and audience classes to a grant, creating it if
// needed, and bumps the tenant's epoch in the same transaction. Audience
// classes must belong to the tenant ([InvalidError] otherwise); an unknown
// tenant is a [NotFoundError].
//
// With SetCondition the grant's condition is replaced in the same
// transaction (so the epoch bump covers it); a condition alone on a grant
// that does not exist is a [NotFoundError] (a grant with no scope and no
// class does not exist).
func (s *Store) Grant(ctx context.Context, g GrantChange) (*registryv1.Grant, int64, error) {
	return s.changeGrant(ctx, g, registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_GRANT, func(scopes, classes []string, exists bool) ([]string, []string, error) {
		if !exists && len(g.Scopes) == 0 && len(g.AudienceClasses) == 0 {
			return nil, nil, &NotFoundError{Kind: "grant", ID: g.id()}
		}
		return union(scopes, g.Scopes), union(classes, g.AudienceClasses), nil
	})
}

// Revoke removes scopes and audience classes from a grant and bumps the
// tenant's epoch in the same transaction, even when nothing named was held.
// A grant left empty is deleted. [NotFoundError] when the grant does not
// exist.
func (s *Store) Revoke(ctx context.Context, g GrantChange) (*registryv1.Grant, int64, error) {
	return s.changeGrant(ctx, g, registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_REVOKE, func(scopes, classes []string, exists bool) ([]string, []string, error) {
		if !exists {
			return nil, nil, &NotFoundError{Kind: "grant", ID: g.id()}
		}
		return minus(scopes, g.Scopes), minus(classes, g.AudienceClasses), nil
	})
}

func (s *Store) changeGrant(ctx context.Context, g GrantChange, cause registryv1.PolicyChangeCause,
	edit func(scopes, classes []string, exists bool) ([]string, []string, error)) (*registryv1.Grant, int64, error) {
	var (
		out   *registryv1.Grant
		epoch int64
	)
	err := s.write(ctx, func(u *unit) error {
		// The bump comes first: its row lock on the tenant serializes every
		// grant change of the tenant, so the read-modify-write below is safe.
		pcs, err := u.bump(ctx, []string{g.TenantID}, cause)
		if err != nil {
			return err
		}
		if cause == registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_GRANT {
			if err := checkClasses(ctx, u.tx, g.TenantID, g.AudienceClasses); err != nil {
				return err
			}
		}
		var (
			scopes, classes []string
			cond            string
		)
		err = u.tx.QueryRow(ctx, `SELECT scopes, audience_classes, condition FROM grants WHERE tenant_id = $1 AND subject = $2 AND grp = $3`,
			g.TenantID, g.Subject, g.Group).Scan(&scopes, &classes, &cond)
		exists := err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		scopes, classes, err = edit(scopes, classes, exists)
		if err != nil {
			return err
		}
		if g.SetCondition {
			cond = g.Condition
		}
		grant := &registryv1.Grant{TenantId: g.TenantID, Subject: g.Subject, Group: g.Group, Scopes: scopes, AudienceClasses: classes, Condition: cond}
		var at time.Time
		if len(scopes) == 0 && len(classes) == 0 {
			if _, err := u.tx.Exec(ctx, `DELETE FROM grants WHERE tenant_id = $1 AND subject = $2 AND grp = $3`,
				g.TenantID, g.Subject, g.Group); err != nil {
				return err
			}
			if err := u.tx.QueryRow(ctx, "SELECT now()").Scan(&at); err != nil {
				return err
			}
		} else if err := u.tx.QueryRow(ctx, `INSERT INTO grants (tenant_id, subject, grp, scopes, audience_classes, condition)
VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tenant_id, subject, grp)
DO UPDATE SET scopes = EXCLUDED.scopes, audience_classes = EXCLUDED.audience_classes, condition = EXCLUDED.condition, updated_at = now()
RETURNING updated_at`, g.TenantID, g.Subject, g.Group, nonNil(scopes), nonNil(classes), cond).Scan(&at); err != nil {
			return fmt.Errorf("write grant: %w", err)
		}
		grant.UpdatedAt = ts(at)
		if err := recordGrant(ctx, u.tx, grant, pcs[0].PolicyEpoch); err != nil {
			return err
		}
		pcs[0].Grant = grant
		out, epoch = grant, pcs[0].PolicyEpoch
		return nil
	})
	return out, epoch, err
}

// recordGrant ends the grant's current version at epoch and, unless the
// grant is now empty (deleted), starts its new version there. It runs in
// the transaction that bumped the tenant to epoch.
func recordGrant(ctx context.Context, tx pgx.Tx, g *registryv1.Grant, epoch int64) error {
	if _, err := tx.Exec(ctx, `UPDATE grant_history SET to_epoch = $4
WHERE tenant_id = $1 AND subject = $2 AND grp = $3 AND to_epoch IS NULL`, g.GetTenantId(), g.GetSubject(), g.GetGroup(), epoch); err != nil {
		return fmt.Errorf("end grant version: %w", err)
	}
	if len(g.GetScopes()) == 0 && len(g.GetAudienceClasses()) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `INSERT INTO grant_history (tenant_id, subject, grp, scopes, audience_classes, updated_at, from_epoch, condition)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, g.GetTenantId(), g.GetSubject(), g.GetGroup(), nonNil(g.GetScopes()), nonNil(g.GetAudienceClasses()),
		g.GetUpdatedAt().AsTime(), epoch, g.GetCondition()); err != nil {
		return fmt.Errorf("write grant version: %w", err)
	}
	return nil
}

// checkClasses reports every named class that is not a class of tenant.
func checkClasses(ctx context.Context, q querier, tenant string, names []string) error {
	rows, err := q.Query(ctx, "SELECT name FROM audience_classes WHERE tenant_id = $1 AND name = ANY($2)", tenant, names)
	if err != nil {
		return err
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	var v apierror.Violations
	for i, n := range names {
		if !slices.Contains(found, n) {
			v.Add(fmt.Sprintf("audience_classes[%d]", i), "audience class %q does not exist in tenant %q", n, tenant)
		}
	}
	if len(v) > 0 {
		return &InvalidError{Violations: v}
	}
	return nil
}

// GetPolicy returns a tenant's epoch, grants, audience classes and the
// rollout stages of the servers they cover, and the log revision they
// were read at. [NotFoundError] for an unknown tenant.
func (s *Store) GetPolicy(ctx context.Context, tenant string) (*registryv1.Policy, int64, error) {
	var (
		p   = &registryv1.Policy{TenantId: tenant}
		rev int64
	)
	err := s.read(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, "SELECT policy_epoch FROM tenants WHERE tenant_id = $1", tenant).Scan(&p.PolicyEpoch)
		if errors.Is(err, pgx.ErrNoRows) {
			return &NotFoundError{Kind: "tenant", ID: tenant}
		}
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT tenant_id, subject, grp, scopes, audience_classes, updated_at, condition FROM grants
WHERE tenant_id = $1 ORDER BY subject, grp`, tenant)
		if err != nil {
			return err
		}
		p.Grants, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (*registryv1.Grant, error) {
			var g registryv1.Grant
			var at time.Time
			err := r.Scan(&g.TenantId, &g.Subject, &g.Group, &g.Scopes, &g.AudienceClasses, &at, &g.Condition)
			g.UpdatedAt = ts(at)
			return &g, err
		})
		if err != nil {
			return err
		}
		p.AudienceClasses, _, err = listClasses(ctx, tx, ClassFilter{TenantID: tenant}, Page{Limit: maxClassesPerPolicy})
		if err != nil {
			return err
		}
		if p.RolloutStages, err = policyStages(ctx, tx, tenant, p.AudienceClasses, 0); err != nil {
			return err
		}
		rev, err = changelog.HeadTx(ctx, tx)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	return p, rev, nil
}

// GetPolicyAt returns a tenant's policy as it was at epoch: the grants and
// audience classes in force once the change that produced epoch committed,
// and the log revision of the read. A policy at a passed epoch never
// changes. [NotFoundError] for an unknown tenant; [EpochError] for an
// epoch the tenant has not reached, or one from before its history was
// kept. epoch must be positive.
func (s *Store) GetPolicyAt(ctx context.Context, tenant string, epoch int64) (*registryv1.Policy, int64, error) {
	var (
		p   = &registryv1.Policy{TenantId: tenant, PolicyEpoch: epoch}
		rev int64
	)
	err := s.read(ctx, func(tx pgx.Tx) error {
		var current, since int64
		err := tx.QueryRow(ctx, "SELECT policy_epoch, history_since FROM tenants WHERE tenant_id = $1", tenant).Scan(&current, &since)
		if errors.Is(err, pgx.ErrNoRows) {
			return &NotFoundError{Kind: "tenant", ID: tenant}
		}
		if err != nil {
			return err
		}
		switch {
		case epoch > current:
			return &EpochError{Reason: ReasonEpochNotReached, Tenant: tenant, Epoch: epoch, Current: current, Since: since}
		case epoch < since:
			return &EpochError{Reason: ReasonEpochBeforeHistory, Tenant: tenant, Epoch: epoch, Current: current, Since: since}
		}
		rows, err := tx.Query(ctx, `SELECT tenant_id, subject, grp, scopes, audience_classes, updated_at, condition FROM grant_history
WHERE tenant_id = $1 AND from_epoch <= $2 AND (to_epoch IS NULL OR to_epoch > $2) ORDER BY subject, grp`, tenant, epoch)
		if err != nil {
			return err
		}
		p.Grants, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (*registryv1.Grant, error) {
			var g registryv1.Grant
			var at time.Time
			err := r.Scan(&g.TenantId, &g.Subject, &g.Group, &g.Scopes, &g.AudienceClasses, &at, &g.Condition)
			g.UpdatedAt = ts(at)
			return &g, err
		})
		if err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT name, tenant_id, description, version, updated_at, server_ids, secret_refs FROM class_history
WHERE tenant_id = $1 AND from_epoch <= $2 AND (to_epoch IS NULL OR to_epoch > $2) ORDER BY name LIMIT $3`, tenant, epoch, maxClassesPerPolicy)
		if err != nil {
			return err
		}
		p.AudienceClasses, err = pgx.CollectRows(rows, scanClass)
		if err != nil {
			return err
		}
		if p.RolloutStages, err = policyStages(ctx, tx, tenant, p.AudienceClasses, epoch); err != nil {
			return err
		}
		rev, err = changelog.HeadTx(ctx, tx)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	return p, rev, nil
}

// maxClassesPerPolicy bounds the audience classes GetPolicy returns.
const maxClassesPerPolicy = 10_000

func union(have, add []string) []string {
	out := append(slices.Clone(have), add...)
	slices.Sort(out)
	return slices.Compact(out)
}

func minus(have, remove []string) []string {
	out := slices.DeleteFunc(slices.Clone(have), func(s string) bool { return slices.Contains(remove, s) })
	slices.Sort(out)
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
