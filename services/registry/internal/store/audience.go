package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolcrib/toolcrib/platform/apierror"
	"github.com/toolcrib/toolcrib/platform/changelog"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// PutAudienceClass creates (expectedVersion 0) or updates (expectedVersion
// = the stored version) an audience class and bumps its tenant's epoch in
// the same transaction; it returns the stored class and the new epoch.
// [ExistsError] when creating an existing class, [StaleVersionError] for a
// stale version, [NotFoundError] for an unknown tenant or class,
// [InvalidError] when a server is not registered. a must be valid.
func (s *Store) PutAudienceClass(ctx context.Context, a *registryv1.AudienceClass, expectedVersion int64) (*registryv1.AudienceClass, int64, error) {
	var (
		out   *registryv1.AudienceClass
		epoch int64
	)
	err := s.write(ctx, func(u *unit) error {
		// Tenant first: the lock order of every tenant-scoped write.
		pcs, err := u.bump(ctx, []string{a.GetTenantId()}, registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_AUDIENCE_CLASS)
		if err != nil {
			return err
		}
		epoch = pcs[0].PolicyEpoch
		var stored int64
		err = u.tx.QueryRow(ctx, "SELECT version FROM audience_classes WHERE name = $1 FOR UPDATE", a.GetName()).Scan(&stored)
		exists := err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		switch {
		case expectedVersion == 0 && exists:
			return &ExistsError{Kind: "audience class", ID: a.GetName()}
		case expectedVersion != 0 && !exists:
			return &NotFoundError{Kind: "audience class", ID: a.GetName()}
		case exists && stored != expectedVersion:
			return &StaleVersionError{Kind: "audience class", ID: a.GetName(), Expected: expectedVersion, Stored: stored}
		}
		if err := checkServers(ctx, u.tx, a.GetServers()); err != nil {
			return err
		}
		if exists {
			_, err = u.tx.Exec(ctx, `UPDATE audience_classes SET description = $2, version = version + 1, updated_at = now()
WHERE name = $1`, a.GetName(), a.GetDescription())
		} else {
			_, err = u.tx.Exec(ctx, `INSERT INTO audience_classes (name, tenant_id, description) VALUES ($1, $2, $3)`,
				a.GetName(), a.GetTenantId(), a.GetDescription())
		}
		if err != nil {
			return fmt.Errorf("write audience class: %w", err)
		}
		if _, err := u.tx.Exec(ctx, "DELETE FROM audience_servers WHERE class_name = $1", a.GetName()); err != nil {
			return err
		}
		for i, srv := range a.GetServers() {
			if _, err := u.tx.Exec(ctx, `INSERT INTO audience_servers (class_name, server_id, secret_ref, position)
VALUES ($1, $2, $3, $4)`, a.GetName(), srv.GetServerId(), srv.GetSecretRef(), i); err != nil {
				return fmt.Errorf("write audience server: %w", err)
			}
		}
		classes, _, err := listClasses(ctx, u.tx, ClassFilter{Name: a.GetName()}, Page{Limit: 1})
		if err != nil {
			return err
		}
		out = classes[0]
		if err := recordClass(ctx, u.tx, out, epoch); err != nil {
			return err
		}
		kind := registryv1.ChangeKind_CHANGE_KIND_CREATED
		if exists {
			kind = registryv1.ChangeKind_CHANGE_KIND_UPDATED
		}
		u.emitAudienceClass(kind, out)
		return nil
	})
	return out, epoch, err
}

// recordClass ends the class's current version at epoch and starts its
// new version there, in the transaction that bumped the tenant to epoch.
func recordClass(ctx context.Context, tx pgx.Tx, a *registryv1.AudienceClass, epoch int64) error {
	if _, err := tx.Exec(ctx, "UPDATE class_history SET to_epoch = $2 WHERE name = $1 AND to_epoch IS NULL", a.GetName(), epoch); err != nil {
		return fmt.Errorf("end class version: %w", err)
	}
	ids := make([]string, len(a.GetServers()))
	refs := make([]string, len(a.GetServers()))
	for i, s := range a.GetServers() {
		ids[i], refs[i] = s.GetServerId(), s.GetSecretRef()
	}
	if _, err := tx.Exec(ctx, `INSERT INTO class_history (name, tenant_id, description, version, updated_at, server_ids, secret_refs, from_epoch)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, a.GetName(), a.GetTenantId(), a.GetDescription(), a.GetVersion(), a.GetUpdatedAt().AsTime(),
		ids, refs, epoch); err != nil {
		return fmt.Errorf("write class version: %w", err)
	}
	return nil
}

func checkServers(ctx context.Context, q querier, servers []*registryv1.AudienceServer) error {
	ids := make([]string, len(servers))
	for i, s := range servers {
		ids[i] = s.GetServerId()
	}
	rows, err := q.Query(ctx, "SELECT server_id FROM servers WHERE server_id = ANY($1)", ids)
	if err != nil {
		return err
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, id := range found {
		known[id] = true
	}
	var v apierror.Violations
	for i, id := range ids {
		if !known[id] {
			v.Add(fmt.Sprintf("audience_class.servers[%d].server_id", i), "server %q is not registered", id)
		}
	}
	if len(v) > 0 {
		return &InvalidError{Violations: v}
	}
	return nil
}

// ClassFilter selects audience classes; empty fields match all.
type ClassFilter struct {
	Name     string
	TenantID string
	ServerID string
}

// GetAudienceClass returns one class; [NotFoundError] when unknown.
func (s *Store) GetAudienceClass(ctx context.Context, name string) (*registryv1.AudienceClass, error) {
	var out *registryv1.AudienceClass
	err := s.read(ctx, func(tx pgx.Tx) error {
		classes, _, err := listClasses(ctx, tx, ClassFilter{Name: name}, Page{Limit: 1})
		if err != nil {
			return err
		}
		if len(classes) == 0 {
			return &NotFoundError{Kind: "audience class", ID: name}
		}
		out = classes[0]
		return nil
	})
	return out, err
}

// ListAudienceClasses returns classes ordered by name, whether more follow,
// and the log revision the list was read at.
func (s *Store) ListAudienceClasses(ctx context.Context, f ClassFilter, page Page) (classes []*registryv1.AudienceClass, hasMore bool, rev int64, err error) {
	err = s.read(ctx, func(tx pgx.Tx) error {
		if classes, hasMore, err = listClasses(ctx, tx, f, page); err != nil {
			return err
		}
		rev, err = changelog.HeadTx(ctx, tx)
		return err
	})
	return classes, hasMore, rev, err
}

func listClasses(ctx context.Context, q querier, f ClassFilter, page Page) ([]*registryv1.AudienceClass, bool, error) {
	rows, err := q.Query(ctx, `SELECT c.name, c.tenant_id, c.description, c.version, c.updated_at,
	coalesce((SELECT array_agg(s.server_id ORDER BY s.position) FROM audience_servers s WHERE s.class_name = c.name), '{}'),
	coalesce((SELECT array_agg(s.secret_ref ORDER BY s.position) FROM audience_servers s WHERE s.class_name = c.name), '{}')
FROM audience_classes c
WHERE c.name > $1 AND ($2 = '' OR c.name = $2) AND ($3 = '' OR c.tenant_id = $3)
  AND ($4 = '' OR EXISTS (SELECT 1 FROM audience_servers s WHERE s.class_name = c.name AND s.server_id = $4))
ORDER BY c.name LIMIT $5`, page.After, f.Name, f.TenantID, f.ServerID, page.Limit+1)
	if err != nil {
		return nil, false, err
	}
	list, err := pgx.CollectRows(rows, scanClass)
	if err != nil {
		return nil, false, err
	}
	list, hasMore := more(list, page.Limit)
	return list, hasMore, nil
}

// scanClass reads name, tenant_id, description, version, updated_at and the
// parallel server id and secret reference arrays.
func scanClass(r pgx.CollectableRow) (*registryv1.AudienceClass, error) {
	var (
		a         registryv1.AudienceClass
		at        time.Time
		ids, refs []string
	)
	if err := r.Scan(&a.Name, &a.TenantId, &a.Description, &a.Version, &at, &ids, &refs); err != nil {
		return nil, err
	}
	a.UpdatedAt = ts(at)
	for i := range ids {
		a.Servers = append(a.Servers, &registryv1.AudienceServer{ServerId: ids[i], SecretRef: refs[i]})
	}
	return &a, nil
}

// Binding is one server as one audience class reads it (see
// [Store.GetBinding]).
type Binding struct {
	Server *registryv1.Server
	// Binding is the class's binding of the server; nil when the class does
	// not cover it.
	Binding *registryv1.AudienceServer
	// TenantID and PolicyEpoch are the class's tenant and its current epoch.
	TenantID    string
	PolicyEpoch int64
	// Revision is the log head the read saw.
	Revision int64
}

// GetBinding reads a server, a class's binding of it, the class's tenant
// and that tenant's epoch in one statement (one snapshot, one round trip),
// touching one row of each table whatever the class's size.
// [NotFoundError] when the server or the class is unknown.
func (s *Store) GetBinding(ctx context.Context, serverID, className string) (*Binding, error) {
	return scanBinding(s.pool.QueryRow(ctx, bindingSQL, serverID, className), serverID, className)
}

// extraRow scans a row whose first columns are the server's and whose
// remaining ones go to extra.
type extraRow struct {
	row   pgx.Row
	extra []any
}

func (r extraRow) Scan(dest ...any) error { return r.row.Scan(append(dest, r.extra...)...) }
