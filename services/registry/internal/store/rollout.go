package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/principal"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// RolloutSet is a validated SetRolloutStage request: Stage is SHADOW,
// CANARY or FULL; for CANARY, Percent is in 0..100 and Effects is a
// non-empty sorted set of known effect classes; for the other stages both
// are zero.
type RolloutSet struct {
	ServerID        string
	AudienceClass   string
	Stage           registryv1.Stage
	Percent         int32
	Effects         []catalogv1.EffectClass
	Reason          string
	ExpectedVersion int64
}

// DefaultStage is the stage of a (server, class) pair never set: FULL at
// version 0, today's behaviour before rollout stages existed.
func DefaultStage(serverID, class string) *registryv1.RolloutStage {
	return &registryv1.RolloutStage{ServerId: serverID, AudienceClass: class, TenantId: ClassTenant(class),
		Stage: registryv1.Stage_STAGE_FULL}
}

// sameStage reports whether a and b admit exactly the same runs and tools.
func sameStage(a *registryv1.RolloutStage, set RolloutSet) bool {
	return a.GetStage() == set.Stage && a.GetCanaryPercent() == set.Percent && slices.Equal(a.GetCanaryEffects(), set.Effects)
}

// SetRolloutStage sets the stage of (set.ServerID, set.AudienceClass) and
// bumps the class's tenant's epoch in the same transaction; it returns the
// stored stage, the tenant's epoch after the call, and whether anything
// changed (setting the stored stage again writes nothing and bumps
// nothing). [NotFoundError] for an unknown server or class, and for a
// class of a tenant p does not see; [PermissionError] unless p is a
// platform admin or the server's owner; [StaleVersionError] when
// set.ExpectedVersion is not 0 and not the stored version.
func (s *Store) SetRolloutStage(ctx context.Context, p principal.Principal, set RolloutSet) (*registryv1.RolloutStage, int64, bool, error) {
	var (
		out     *registryv1.RolloutStage
		epoch   int64
		changed bool
	)
	tenant := ClassTenant(set.AudienceClass)
	err := s.write(ctx, func(u *unit) error {
		out, changed = nil, false
		// Tenant first: the lock order of every tenant-scoped write. The row
		// lock also serializes every stage change of the tenant.
		err := u.tx.QueryRow(ctx, "SELECT policy_epoch FROM tenants WHERE tenant_id = $1 FOR UPDATE", tenant).Scan(&epoch)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && !p.Admin && !p.SeesTenant(tenant)) {
			return &NotFoundError{Kind: "audience class", ID: set.AudienceClass}
		}
		if err != nil {
			return err
		}
		if err := pairExists(ctx, u.tx, set.ServerID, set.AudienceClass, func(owner string) error {
			if !p.Admin && !p.Owns(owner) {
				return &PermissionError{Message: "only a platform admin or the server's owner may set its rollout stage"}
			}
			return nil
		}); err != nil {
			return err
		}
		cur, err := currentStage(ctx, u.tx, set.ServerID, set.AudienceClass)
		if err != nil {
			return err
		}
		if set.ExpectedVersion != 0 && cur.GetVersion() != set.ExpectedVersion {
			return &StaleVersionError{Kind: "rollout stage", ID: set.AudienceClass + "/" + set.ServerID,
				Expected: set.ExpectedVersion, Stored: cur.GetVersion()}
		}
		if sameStage(cur, set) {
			out = cur
			return nil
		}
		pcs, err := u.bump(ctx, []string{tenant}, registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_ROLLOUT_STAGE)
		if err != nil {
			return err
		}
		epoch = pcs[0].GetPolicyEpoch()
		effects := effectNumbers(set.Effects)
		var at time.Time
		if err := u.tx.QueryRow(ctx, `INSERT INTO rollout_stages (audience_class, server_id, tenant_id, stage, canary_percent,
	canary_effects, reason, changed_by, version, policy_epoch) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1, $9)
ON CONFLICT (audience_class, server_id) DO UPDATE SET stage = EXCLUDED.stage, canary_percent = EXCLUDED.canary_percent,
	canary_effects = EXCLUDED.canary_effects, reason = EXCLUDED.reason, changed_by = EXCLUDED.changed_by,
	version = rollout_stages.version + 1, updated_at = now(), policy_epoch = EXCLUDED.policy_epoch, revision = 0
RETURNING version, updated_at`, set.AudienceClass, set.ServerID, tenant, int16(set.Stage), int16(set.Percent), effects,
			set.Reason, p.Subject, epoch).Scan(&cur.Version, &at); err != nil {
			return fmt.Errorf("write rollout stage: %w", err)
		}
		out = &registryv1.RolloutStage{ServerId: set.ServerID, AudienceClass: set.AudienceClass, TenantId: tenant,
			Stage: set.Stage, CanaryPercent: set.Percent, CanaryEffects: slices.Clone(set.Effects), Reason: set.Reason,
			ChangedBy: p.Subject, Version: cur.Version, UpdatedAt: ts(at), PolicyEpoch: epoch}
		if _, err := u.tx.Exec(ctx, `UPDATE rollout_stage_history SET to_epoch = $3
WHERE audience_class = $1 AND server_id = $2 AND to_epoch IS NULL`, set.AudienceClass, set.ServerID, epoch); err != nil {
			return fmt.Errorf("end rollout stage version: %w", err)
		}
		if _, err := u.tx.Exec(ctx, `INSERT INTO rollout_stage_history (audience_class, server_id, tenant_id, stage,
	canary_percent, canary_effects, reason, changed_by, version, updated_at, policy_epoch, from_epoch)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)`, set.AudienceClass, set.ServerID, tenant, int16(set.Stage),
			int16(set.Percent), effects, set.Reason, p.Subject, out.Version, at, epoch); err != nil {
			return fmt.Errorf("write rollout stage version: %w", err)
		}
		changed = true
		kind := registryv1.ChangeKind_CHANGE_KIND_UPDATED
		if out.Version == 1 {
			kind = registryv1.ChangeKind_CHANGE_KIND_CREATED
		}
		u.objects = append(u.objects, queued{logKind: "rollout_stage",
			change: &registryv1.Change{Kind: kind, Object: &registryv1.Change_RolloutStage{RolloutStage: out}},
			recorded: func(ctx context.Context, tx pgx.Tx, rev int64) error {
				if _, err := tx.Exec(ctx, "UPDATE rollout_stages SET revision = $3 WHERE audience_class = $1 AND server_id = $2",
					set.AudienceClass, set.ServerID, rev); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `UPDATE rollout_stage_history SET revision = $3
WHERE audience_class = $1 AND server_id = $2 AND to_epoch IS NULL`, set.AudienceClass, set.ServerID, rev); err != nil {
					return err
				}
				out.Revision = rev
				return nil
			}})
		return nil
	})
	if err != nil {
		return nil, 0, false, err
	}
	return out, epoch, changed, nil
}

// pairExists returns a [NotFoundError] unless the server is registered and
// the class exists; check, when set, is given the server's owner.
func pairExists(ctx context.Context, q querier, serverID, class string, check func(owner string) error) error {
	var owner string
	err := q.QueryRow(ctx, "SELECT owner FROM servers WHERE server_id = $1", serverID).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return &NotFoundError{Kind: "server", ID: serverID}
	}
	if err != nil {
		return err
	}
	var n int
	if err := q.QueryRow(ctx, "SELECT count(*) FROM audience_classes WHERE name = $1", class).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return &NotFoundError{Kind: "audience class", ID: class}
	}
	if check != nil {
		return check(owner)
	}
	return nil
}

const stageCols = `stage, canary_percent, canary_effects, reason, changed_by, version, updated_at, policy_epoch, revision`

// currentStage reads the stored stage of a pair, or [DefaultStage].
func currentStage(ctx context.Context, q querier, serverID, class string) (*registryv1.RolloutStage, error) {
	rows, err := q.Query(ctx, `SELECT audience_class, server_id, `+stageCols+` FROM rollout_stages
WHERE audience_class = $1 AND server_id = $2`, class, serverID)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, scanStage)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return DefaultStage(serverID, class), nil
	}
	return list[0], nil
}

// scanStage reads audience_class, server_id and [stageCols]; NULLs (a pair
// never set, read through an outer join) read as [DefaultStage].
func scanStage(r pgx.CollectableRow) (*registryv1.RolloutStage, error) {
	var (
		class, server       string
		stage, percent      *int16
		effects             []int16
		reason, by          *string
		version, epoch, rev *int64
		at                  *time.Time
	)
	if err := r.Scan(&class, &server, &stage, &percent, &effects, &reason, &by, &version, &at, &epoch, &rev); err != nil {
		return nil, err
	}
	out := DefaultStage(server, class)
	if stage == nil {
		return out, nil
	}
	out.Stage = registryv1.Stage(*stage)
	out.CanaryPercent = int32(*percent)
	for _, e := range effects {
		out.CanaryEffects = append(out.CanaryEffects, catalogv1.EffectClass(e))
	}
	out.Reason, out.ChangedBy, out.Version, out.PolicyEpoch, out.Revision = *reason, *by, *version, *epoch, *rev
	out.UpdatedAt = ts(*at)
	return out, nil
}

func effectNumbers(effects []catalogv1.EffectClass) []int16 {
	out := make([]int16, len(effects))
	for i, e := range effects {
		out[i] = int16(e)
	}
	return out
}

// GetRolloutStage returns the stage of a pair ([DefaultStage] when never
// set) and, when history is true, every stage it was set to, oldest first.
// [NotFoundError] for an unknown server or class.
func (s *Store) GetRolloutStage(ctx context.Context, serverID, class string, history bool) (*registryv1.RolloutStage, []*registryv1.RolloutStage, error) {
	var (
		out  *registryv1.RolloutStage
		hist []*registryv1.RolloutStage
	)
	err := s.read(ctx, func(tx pgx.Tx) error {
		if err := pairExists(ctx, tx, serverID, class, nil); err != nil {
			return err
		}
		var err error
		if out, err = currentStage(ctx, tx, serverID, class); err != nil || !history {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT audience_class, server_id, `+stageCols+` FROM rollout_stage_history
WHERE audience_class = $1 AND server_id = $2 ORDER BY from_epoch, version`, class, serverID)
		if err != nil {
			return err
		}
		hist, err = pgx.CollectRows(rows, scanStage)
		return err
	})
	return out, hist, err
}

// StageFilter selects rollout stages; empty fields match all.
type StageFilter struct {
	TenantID      string
	ServerID      string
	AudienceClass string
}

// StageKey is the page key of a stage: its class and server, which hold no
// space.
func StageKey(st *registryv1.RolloutStage) string {
	return st.GetAudienceClass() + " " + st.GetServerId()
}

// ListRolloutStages returns the stage of every pair a class covers or that
// was ever set, ordered by class then server, after page.After (a
// [StageKey]); whether more follow; and the log revision of the read.
func (s *Store) ListRolloutStages(ctx context.Context, f StageFilter, page Page) (list []*registryv1.RolloutStage, hasMore bool, rev int64, err error) {
	afterClass, afterServer, _ := strings.Cut(page.After, " ")
	err = s.read(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT p.audience_class, p.server_id, r.stage, r.canary_percent,
	coalesce(r.canary_effects, '{}'), r.reason, r.changed_by, r.version, r.updated_at, r.policy_epoch, r.revision
FROM (SELECT class_name AS audience_class, server_id FROM audience_servers
      UNION SELECT audience_class, server_id FROM rollout_stages) p
JOIN audience_classes c ON c.name = p.audience_class
LEFT JOIN rollout_stages r ON r.audience_class = p.audience_class AND r.server_id = p.server_id
WHERE (p.audience_class, p.server_id) > ($1, $2) AND ($3 = '' OR c.tenant_id = $3) AND ($4 = '' OR p.server_id = $4)
  AND ($5 = '' OR p.audience_class = $5)
ORDER BY p.audience_class, p.server_id LIMIT $6`, afterClass, afterServer, f.TenantID, f.ServerID, f.AudienceClass, page.Limit+1)
		if err != nil {
			return err
		}
		if list, err = pgx.CollectRows(rows, scanStage); err != nil {
			return err
		}
		list, hasMore = more(list, page.Limit)
		rev, err = changelog.HeadTx(ctx, tx)
		return err
	})
	return list, hasMore, rev, err
}

// policyStages returns the stage of every server each of classes covers,
// as in force at epoch (0: now), ordered by class then server: a policy
// holds the stages of the pairs its classes cover, and a pair never set is
// [DefaultStage].
func policyStages(ctx context.Context, q querier, tenant string, classes []*registryv1.AudienceClass, epoch int64) ([]*registryv1.RolloutStage, error) {
	var (
		rows pgx.Rows
		err  error
	)
	if epoch == 0 {
		rows, err = q.Query(ctx, `SELECT audience_class, server_id, `+stageCols+` FROM rollout_stages WHERE tenant_id = $1`, tenant)
	} else {
		rows, err = q.Query(ctx, `SELECT audience_class, server_id, `+stageCols+` FROM rollout_stage_history
WHERE tenant_id = $1 AND from_epoch <= $2 AND (to_epoch IS NULL OR to_epoch > $2)`, tenant, epoch)
	}
	if err != nil {
		return nil, err
	}
	set, err := pgx.CollectRows(rows, scanStage)
	if err != nil {
		return nil, err
	}
	byPair := map[string]*registryv1.RolloutStage{}
	for _, st := range set {
		byPair[StageKey(st)] = st
	}
	var out []*registryv1.RolloutStage
	for _, c := range classes {
		for _, srv := range c.GetServers() {
			st := byPair[c.GetName()+" "+srv.GetServerId()]
			if st == nil {
				st = DefaultStage(srv.GetServerId(), c.GetName())
			}
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b *registryv1.RolloutStage) int { return strings.Compare(StageKey(a), StageKey(b)) })
	return out, nil
}

// endServerStages ends the open history entries of a server being deleted
// at the next epoch of each tenant, and deletes its current stages: the
// server's past stages stay readable at past epochs.
func endServerStages(ctx context.Context, tx pgx.Tx, serverID string) error {
	if _, err := tx.Exec(ctx, `UPDATE rollout_stage_history h SET to_epoch = t.policy_epoch + 1 FROM tenants t
WHERE h.tenant_id = t.tenant_id AND h.server_id = $1 AND h.to_epoch IS NULL`, serverID); err != nil {
		return fmt.Errorf("end rollout stages: %w", err)
	}
	if _, err := tx.Exec(ctx, "DELETE FROM rollout_stages WHERE server_id = $1", serverID); err != nil {
		return fmt.Errorf("delete rollout stages: %w", err)
	}
	return nil
}
