package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/toolcrib/toolcrib/platform/changelog"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

// BindingRead is one pair of [Store.GetBindings].
type BindingRead struct {
	ServerID, AudienceClass string
}

// BindingOutcome is one pair's result of [Store.GetBindings]: Binding, or
// Err (a [NotFoundError]) where [Store.GetBinding] would fail.
type BindingOutcome struct {
	Binding *Binding
	Err     error
}

// GetBindings is [Store.GetBinding] for several pairs in one statement:
// each pair is read as GetBinding reads it, all in the statement's one
// snapshot. An error other than a pair's [NotFoundError] fails the whole
// call.
func (s *Store) GetBindings(ctx context.Context, reads []BindingRead) ([]BindingOutcome, error) {
	servers, classes := make([]string, len(reads)), make([]string, len(reads))
	for i, r := range reads {
		servers[i], classes[i] = r.ServerID, r.AudienceClass
	}
	rows, err := s.pool.Query(ctx, bindingsSQL, servers, classes)
	if err != nil {
		return nil, err
	}
	out := make([]BindingOutcome, len(reads))
	found := make([]bool, len(reads))
	for rows.Next() {
		var i int64
		b, err := scanBinding(extraRow{row: rows, extra: []any{&i}}, "", "")
		if err != nil && !errors.As(err, new(*NotFoundError)) {
			rows.Close()
			return nil, err
		}
		if i < 1 || int(i) > len(reads) {
			rows.Close()
			return nil, fmt.Errorf("get bindings: row for read %d of %d", i, len(reads))
		}
		r := reads[i-1]
		found[i-1] = true
		if err != nil { // the class is unknown (the server was found)
			out[i-1].Err = &NotFoundError{Kind: "audience class", ID: r.AudienceClass}
			continue
		}
		if b.Binding != nil {
			b.Binding.ServerId = r.ServerID
		}
		out[i-1].Binding = b
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i, r := range reads {
		if !found[i] { // no row: the server is unknown
			out[i].Err = &NotFoundError{Kind: "server", ID: r.ServerID}
		}
	}
	return out, nil
}

// bindingsSQL is [bindingSQL] for the pairs ($1[i], $2[i]), each row
// followed by i (1-based); a pair whose server is unknown has no row.
var bindingsSQL = `SELECT b.*, q.i FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS q(server_id, class_name, i)
CROSS JOIN LATERAL (` + bindingQuery("q.server_id", "q.class_name") + `) b`

// bindingSQL reads the [Binding] of ($1 server, $2 class) in one statement.
var bindingSQL = bindingQuery("$1", "$2")

// bindingQuery reads the [Binding] of the server and class the two SQL
// expressions give: no row when the server is unknown, a row without a
// tenant when the class is.
func bindingQuery(server, class string) string {
	return `WITH srv AS (SELECT ` + serverCols + ` FROM servers WHERE server_id = ` + server + `),
cls AS (SELECT c.tenant_id, t.policy_epoch, b.secret_ref
  FROM audience_classes c JOIN tenants t USING (tenant_id)
  LEFT JOIN audience_servers b ON b.class_name = c.name AND b.server_id = ` + server + `
  WHERE c.name = ` + class + `)
SELECT srv.*, cls.tenant_id, cls.policy_epoch, cls.secret_ref, (` + changelog.HeadQuery + `)
FROM srv LEFT JOIN cls ON true`
}

// scanBinding reads a row of [bindingSQL]; a [NotFoundError] when the
// server or the class is unknown.
func scanBinding(row pgx.Row, serverID, className string) (*Binding, error) {
	var (
		b      Binding
		ref    *string
		tenant *string
		epoch  *int64
	)
	srv, err := scanServer(extraRow{row: row, extra: []any{&tenant, &epoch, &ref, &b.Revision}})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &NotFoundError{Kind: "server", ID: serverID}
	}
	if err != nil {
		return nil, err
	}
	if tenant == nil {
		return nil, &NotFoundError{Kind: "audience class", ID: className}
	}
	b.Server, b.TenantID, b.PolicyEpoch = srv, *tenant, *epoch
	if ref != nil {
		b.Binding = &registryv1.AudienceServer{ServerId: serverID, SecretRef: *ref}
	}
	return &b, nil
}

// Pin is one first-use identity pin of [Store.PinIdentities].
type Pin struct {
	ServerID        string
	ExpectedVersion int64
	IdentityPin     string
}

// PinIdentities sets the empty identity pins of servers in one
// transaction, each as a service's [Store.UpdateServer] that changes only
// the pin (optimistic concurrency on ExpectedVersion; a set pin is never
// changed), and appends one UPDATED change per pinned server. Pins are
// applied in order: a second pin of one server sees the version the first
// wrote. A pin that cannot be set changes nothing; its result says why,
// with the stored server. An error fails (and rolls back) every pin.
func (s *Store) PinIdentities(ctx context.Context, pins []Pin) ([]*registryv1.PinResult, error) {
	var out []*registryv1.PinResult
	err := s.write(ctx, func(u *unit) error {
		out = make([]*registryv1.PinResult, len(pins))
		ids := make([]string, 0, len(pins))
		for _, p := range pins {
			ids = append(ids, p.ServerID)
		}
		// The rows in one order, so two calls never deadlock on them.
		rows, err := u.tx.Query(ctx, "SELECT "+serverCols+" FROM servers WHERE server_id = ANY($1) ORDER BY server_id FOR NO KEY UPDATE", ids)
		if err != nil {
			return err
		}
		stored, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*registryv1.Server, error) { return scanServer(r) })
		if err != nil {
			return fmt.Errorf("pin identities: %w", err)
		}
		current := make(map[string]*registryv1.Server, len(stored))
		for _, srv := range stored {
			current[srv.GetServerId()] = srv
		}
		// Decide in order; the pins to write, one per server (a later pin
		// of a server pinned here finds its version moved).
		var setIDs, setPins []string
		for i, p := range pins {
			srv := current[p.ServerID]
			switch {
			case srv == nil:
				out[i] = &registryv1.PinResult{Outcome: registryv1.PinOutcome_PIN_OUTCOME_NOT_FOUND}
			case srv.GetVersion() != p.ExpectedVersion:
				out[i] = &registryv1.PinResult{Outcome: registryv1.PinOutcome_PIN_OUTCOME_VERSION_MISMATCH, Server: srv}
			case srv.GetIdentityPin() != "":
				out[i] = &registryv1.PinResult{Outcome: registryv1.PinOutcome_PIN_OUTCOME_ALREADY_PINNED, Server: srv}
			default:
				next := proto.CloneOf(srv)
				next.IdentityPin, next.Version = p.IdentityPin, srv.GetVersion()+1
				current[p.ServerID] = next
				out[i] = &registryv1.PinResult{Outcome: registryv1.PinOutcome_PIN_OUTCOME_PINNED, Server: next}
				setIDs, setPins = append(setIDs, p.ServerID), append(setPins, p.IdentityPin)
			}
		}
		if len(setIDs) == 0 {
			return nil
		}
		// The tenants covering each pinned server come back with it, read
		// by the UPDATE's own snapshot: the change log's append (flush)
		// needs them, and this saves it a statement of its own.
		rows, err = u.tx.Query(ctx, `UPDATE servers s SET identity_pin = p.pin, version = s.version + 1, updated_at = now()
FROM unnest($1::text[], $2::text[]) AS p(id, pin) WHERE s.server_id = p.id
RETURNING `+prefixed("s.", serverCols)+`, ARRAY(SELECT DISTINCT c.tenant_id FROM audience_servers a
	JOIN audience_classes c ON c.name = a.class_name WHERE a.server_id = s.server_id ORDER BY c.tenant_id)`, setIDs, setPins)
		if err != nil {
			return err
		}
		u.covering = make(map[string][]string, len(setIDs))
		written, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*registryv1.Server, error) {
			var tenants []string
			srv, err := scanServer(withExtra{r, []any{&tenants}})
			if err != nil {
				return nil, err
			}
			if len(tenants) == 0 {
				tenants = nil // as flush's own read gives a server no class covers
			}
			u.covering[srv.GetServerId()] = tenants
			return srv, nil
		})
		if err != nil {
			return fmt.Errorf("pin identities: %w", err)
		}
		byID := make(map[string]*registryv1.Server, len(written))
		for _, srv := range written {
			byID[srv.GetServerId()] = srv
		}
		// Every result that names a server pinned here gets the stored
		// row (a later mismatch of that server included).
		for _, r := range out {
			if w := byID[r.GetServer().GetServerId()]; w != nil {
				r.Server = w
			}
		}
		for _, id := range setIDs {
			u.emitServer(registryv1.ChangeKind_CHANGE_KIND_UPDATED, byID[id])
		}
		return nil
	})
	return out, err
}

// withExtra scans a row's columns into a scanner's destinations and then
// into extra, for columns a statement returns after the scanner's.
type withExtra struct {
	pgx.Row
	extra []any
}

func (w withExtra) Scan(dest ...any) error { return w.Row.Scan(append(dest, w.extra...)...) }

// prefixed qualifies each column of a comma-separated list with p.
func prefixed(p, cols string) string {
	fields := strings.Split(cols, ",")
	for i, f := range fields {
		fields[i] = p + strings.TrimSpace(f)
	}
	return strings.Join(fields, ", ")
}
