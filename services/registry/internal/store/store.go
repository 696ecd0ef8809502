package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/postgres"
	"github.com/toolcrib/toolcrib/services/registry/internal/contract"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// Store is the registry's PostgreSQL store.
type Store struct {
	pool *pgxpool.Pool
	log  *changelog.Log
}

// New returns a store on pool (search_path = registry) appending to log.
func New(pool *pgxpool.Pool, log *changelog.Log) *Store {
	return &Store{pool: pool, log: log}
}

// Log is the Watch log the store appends to.
func (s *Store) Log() *changelog.Log { return s.log }

// maxAttempts bounds the retries of a write that lost to a deadlock or a
// serialization failure.
const maxAttempts = 4

// write runs fn in a transaction, appends the changes it queued and
// commits; retried on a deadlock or serialization failure.
func (s *Store) write(ctx context.Context, fn func(u *unit) error) error {
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			u := &unit{tx: tx}
			if err := fn(u); err != nil {
				return err
			}
			return u.flush(ctx, s.log)
		})
		if err != nil && postgres.IsSerializationFailure(err) && attempt < maxAttempts {
			continue
		}
		return err
	}
}

// read runs fn in a read-only REPEATABLE READ transaction: everything it
// reads, including the log head, is one snapshot.
func (s *Store) read(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

// unit is one write transaction. It queues the changes it makes and
// appends them to the log in [unit.flush], after every row lock it takes.
type unit struct {
	tx       pgx.Tx
	objects  []queued
	policies []*registryv1.PolicyChange
	// covering holds, for servers whose changes are queued, the tenants
	// of the classes covering them as a statement of this transaction
	// already read them (PinIdentities reads them in its UPDATE); flush
	// reads the others.
	covering map[string][]string
}

type queued struct {
	logKind string
	change  *registryv1.Change
	events  []toolEvent
	// recorded, when set, runs with the change's revision once appended.
	recorded func(ctx context.Context, tx pgx.Tx, rev int64) error
}

// toolEvent is one history entry, written with the revision of its tool's
// change.
type toolEvent struct {
	toolID           string
	kind             string
	actor            string
	detail           string
	descriptorDigest string
	contractVersion  int64
	approvalDigest   string
	contract         *contract.Doc
	// audienceClass is the class whose variant changed at the source; empty
	// for changes to the whole tool.
	audienceClass string
}

func (u *unit) emitServer(kind registryv1.ChangeKind, s *registryv1.Server) {
	u.objects = append(u.objects, queued{logKind: "server", change: &registryv1.Change{Kind: kind, Object: &registryv1.Change_Server{Server: s}}})
}

func (u *unit) emitTenant(kind registryv1.ChangeKind, t *registryv1.Tenant) {
	u.objects = append(u.objects, queued{logKind: "tenant", change: &registryv1.Change{Kind: kind, Object: &registryv1.Change_Tenant{Tenant: t}}})
}

func (u *unit) emitAudienceClass(kind registryv1.ChangeKind, a *registryv1.AudienceClass) {
	u.objects = append(u.objects, queued{logKind: "audience_class", change: &registryv1.Change{Kind: kind, Object: &registryv1.Change_AudienceClass{AudienceClass: a}}})
}

func (u *unit) emitTool(kind registryv1.ChangeKind, t *registryv1.Tool, events []toolEvent) {
	u.objects = append(u.objects, queued{logKind: "tool", change: &registryv1.Change{Kind: kind, Object: &registryv1.Change_Tool{Tool: t}}, events: events})
}

// bump raises the policy epoch of each tenant by one and queues a
// PolicyChange for each; it returns them so the caller can attach a grant.
// Tenants are bumped one row at a time in id order, so transactions bumping
// overlapping sets queue instead of deadlocking. An unknown tenant is a
// [NotFoundError].
func (u *unit) bump(ctx context.Context, tenants []string, cause registryv1.PolicyChangeCause) ([]*registryv1.PolicyChange, error) {
	sorted := slices.Clone(tenants)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	var out []*registryv1.PolicyChange
	for _, t := range sorted {
		var epoch int64
		err := u.tx.QueryRow(ctx, "UPDATE tenants SET policy_epoch = policy_epoch + 1 WHERE tenant_id = $1 RETURNING policy_epoch", t).Scan(&epoch)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, &NotFoundError{Kind: "tenant", ID: t}
		}
		if err != nil {
			return nil, fmt.Errorf("bump policy epoch of %s: %w", t, err)
		}
		pc := changelog.NewPolicyChange(t, epoch, cause)
		u.policies = append(u.policies, pc)
		out = append(out, pc)
	}
	return out, nil
}

// flush appends the queued changes to the log, object changes first, and
// writes the tool events with the revision of their tool's change. The
// tenants of every server and tool change are read in one statement, and
// every change is appended in one more (consecutive revisions, see
// [changelog.Log.QueueAppendMany]), whatever their number.
func (u *unit) flush(ctx context.Context, log *changelog.Log) error {
	// Every read comes before the append: from there to the commit every
	// other writer waits on the log's counter row.
	var servers []string
	for _, q := range u.objects {
		if id := changeServer(q.change); id != "" {
			if _, read := u.covering[id]; !read {
				servers = append(servers, id)
			}
		}
	}
	covering, err := affectedTenantsOf(ctx, u.tx, servers)
	if err != nil {
		return err
	}
	for id, tenants := range u.covering {
		if covering == nil {
			covering = map[string][]string{}
		}
		covering[id] = tenants
	}
	n := len(u.objects) + len(u.policies)
	if n == 0 {
		return nil
	}
	revs := make([]int64, n)
	entries := make([]*changelog.Change, 0, n)
	add := func(kind string, ch *registryv1.Change, tenants []string) error {
		payload, err := proto.Marshal(ch)
		if err != nil {
			return fmt.Errorf("marshal change: %w", err)
		}
		entries = append(entries, &changelog.Change{Kind: kind, Payload: payload, Tenants: tenants, Revision: &revs[len(entries)]})
		return nil
	}
	for _, q := range u.objects {
		tenants := ownTenants(q.change)
		if id := changeServer(q.change); id != "" {
			tenants = covering[id]
		}
		if err := add(q.logKind, q.change, tenants); err != nil {
			return err
		}
	}
	for _, pc := range u.policies {
		ch := &registryv1.Change{Kind: registryv1.ChangeKind_CHANGE_KIND_UPDATED, Object: &registryv1.Change_Policy{Policy: pc}}
		if err := add("policy", ch, []string{pc.GetTenantId()}); err != nil {
			return err
		}
	}
	var b pgx.Batch
	if err := log.QueueAppendMany(&b, entries); err != nil {
		return err
	}
	if err := u.tx.SendBatch(ctx, &b).Close(); err != nil {
		return err
	}
	for i, q := range u.objects {
		rev := revs[i]
		if q.recorded != nil {
			if err := q.recorded(ctx, u.tx, rev); err != nil {
				return err
			}
		}
		for _, ev := range q.events {
			var c []byte
			if ev.contract != nil {
				if c, err = ev.contract.Marshal(); err != nil {
					return err
				}
			}
			if _, err := u.tx.Exec(ctx, `INSERT INTO tool_events (tool_id, revision, kind, actor, descriptor_digest,
	contract_version, approval_digest, detail, contract, audience_class) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
				ev.toolID, rev, ev.kind, ev.actor, ev.descriptorDigest, ev.contractVersion, ev.approvalDigest, ev.detail, c,
				ev.audienceClass); err != nil {
				return fmt.Errorf("write tool event: %w", err)
			}
		}
	}
	return nil
}

// changeTenants returns the tenants whose principals see ch on Watch: a
// tenant its own record, its audience classes and policy changes; a server
// and its tools the tenants owning a class that covers the server when the
// change commits (as read in the change's transaction). Platform admins and
// services see everything.
func changeTenants(ctx context.Context, q querier, ch *registryv1.Change) ([]string, error) {
	if id := changeServer(ch); id != "" {
		return affectedTenants(ctx, q, id)
	}
	return ownTenants(ch), nil
}

// changeServer is the server whose covering classes' tenants see ch (a
// server or tool change); empty for other changes.
func changeServer(ch *registryv1.Change) string {
	switch o := ch.GetObject().(type) {
	case *registryv1.Change_Server:
		return o.Server.GetServerId()
	case *registryv1.Change_Tool:
		return o.Tool.GetServerId()
	}
	return ""
}

// ownTenants is the tenant that sees a change of an object of its own (a
// tenant, audience class, policy or rollout stage); nil for other changes.
func ownTenants(ch *registryv1.Change) []string {
	switch o := ch.GetObject().(type) {
	case *registryv1.Change_Tenant:
		return []string{o.Tenant.GetTenantId()}
	case *registryv1.Change_AudienceClass:
		return []string{o.AudienceClass.GetTenantId()}
	case *registryv1.Change_Policy:
		return []string{o.Policy.GetTenantId()}
	case *registryv1.Change_RolloutStage:
		return []string{o.RolloutStage.GetTenantId()}
	}
	return nil
}

// DecodeChange turns a log entry into the Change sent on Watch.
func DecodeChange(e changelog.Entry) (*registryv1.Change, error) {
	ch := &registryv1.Change{}
	if err := proto.Unmarshal(e.Payload, ch); err != nil {
		return nil, fmt.Errorf("change %d: %w", e.Revision, err)
	}
	ch.Revision = e.Revision
	ch.CommittedAt = timestamppb.New(e.CommittedAt)
	return ch, nil
}

// querier is what both a pool and a transaction offer.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// affectedTenants returns the tenants owning an audience class that covers
// the server: those whose admission decisions a change of the server's
// tools can alter.
func affectedTenants(ctx context.Context, q querier, serverID string) ([]string, error) {
	m, err := affectedTenantsOf(ctx, q, []string{serverID})
	return m[serverID], err
}

// affectedTenantsOf is [affectedTenants] of each server, in one statement;
// a server no class covers is absent.
func affectedTenantsOf(ctx context.Context, q querier, serverIDs []string) (map[string][]string, error) {
	if len(serverIDs) == 0 {
		return nil, nil
	}
	rows, err := q.Query(ctx, `SELECT s.server_id, array_agg(DISTINCT c.tenant_id ORDER BY c.tenant_id) FROM audience_servers s
JOIN audience_classes c ON c.name = s.class_name WHERE s.server_id = ANY($1) GROUP BY s.server_id`, serverIDs)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	var id string
	var tenants []string
	_, err = pgx.ForEachRow(rows, []any{&id, &tenants}, func() error {
		out[id] = tenants
		tenants = nil
		return nil
	})
	return out, err
}

// Page bounds a list: items after After (exclusive), at most Limit.
type Page struct {
	After string
	Limit int
}

// ts converts a time to a timestamp message.
func ts(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

// jsonOrNil marshals d, or returns nil for a nil contract.
func jsonOrNil(d *contract.Doc) ([]byte, error) {
	if d == nil {
		return nil, nil
	}
	return json.Marshal(d)
}

// more trims a list read with Limit+1 rows and reports whether more exist.
func more[T any](items []T, limit int) ([]T, bool) {
	if len(items) > limit {
		return items[:limit], true
	}
	return items, false
}
