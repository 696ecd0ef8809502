package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolcrib/toolcrib/platform/changelog"
	"github.com/toolcrib/toolcrib/platform/principal"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

const serverCols = `server_id, display_name, description, owner, transport, url, command, args,
	trust_level, revision_source, identity_pin, scan_interval_us, version, created_at, updated_at, pin_dir`

func scanServer(row pgx.Row) (*registryv1.Server, error) {
	var (
		s                       registryv1.Server
		transport, url, command string
		pinDir                  string
		args                    []string
		trust, revSource        int32
		scanUS                  int64
		createdAt, updatedAt    time.Time
	)
	if err := row.Scan(&s.ServerId, &s.DisplayName, &s.Description, &s.Owner, &transport, &url, &command, &args,
		&trust, &revSource, &s.IdentityPin, &scanUS, &s.Version, &createdAt, &updatedAt, &pinDir); err != nil {
		return nil, err
	}
	switch transport {
	case "streamable_http":
		s.Transport = &registryv1.Server_StreamableHttp{StreamableHttp: &registryv1.StreamableHttpTransport{Url: url}}
	case "stdio":
		s.Transport = &registryv1.Server_Stdio{Stdio: &registryv1.StdioTransport{Command: command, Args: args, PinDir: pinDir}}
	}
	s.TrustLevel = registryv1.TrustLevel(trust)
	s.RevisionSource = registryv1.RevisionSource(revSource)
	if scanUS > 0 {
		s.ScanInterval = durationpb.New(time.Duration(scanUS) * time.Microsecond)
	}
	s.CreatedAt, s.UpdatedAt = ts(createdAt), ts(updatedAt)
	return &s, nil
}

// serverArgs returns the column values of s's mutable fields, in the order
// of the INSERT and UPDATE statements below.
func serverArgs(s *registryv1.Server) []any {
	transport, url, command, args, pinDir := "streamable_http", "", "", []string{}, ""
	if st := s.GetStdio(); st != nil {
		transport, command, pinDir = "stdio", st.GetCommand(), st.GetPinDir()
		args = append(args, st.GetArgs()...)
	} else {
		url = s.GetStreamableHttp().GetUrl()
	}
	return []any{s.GetServerId(), s.GetDisplayName(), s.GetDescription(), s.GetOwner(), transport, url, command, args,
		int32(s.GetTrustLevel()), int32(s.GetRevisionSource()), s.GetIdentityPin(), s.GetScanInterval().AsDuration().Microseconds(), pinDir}
}

// RegisterServer stores a new server at version 1. [ExistsError] when the
// id is taken. s must be valid.
func (s *Store) RegisterServer(ctx context.Context, srv *registryv1.Server) (*registryv1.Server, error) {
	var out *registryv1.Server
	err := s.write(ctx, func(u *unit) error {
		var err error
		out, err = scanServer(u.tx.QueryRow(ctx, `INSERT INTO servers (server_id, display_name, description, owner, transport,
	url, command, args, trust_level, revision_source, identity_pin, scan_interval_us, pin_dir)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
ON CONFLICT (server_id) DO NOTHING RETURNING `+serverCols, serverArgs(srv)...))
		if errors.Is(err, pgx.ErrNoRows) {
			return &ExistsError{Kind: "server", ID: srv.GetServerId()}
		}
		if err != nil {
			return err
		}
		u.emitServer(registryv1.ChangeKind_CHANGE_KIND_CREATED, out)
		return nil
	})
	return out, err
}

// GetServer returns one server; [NotFoundError] when unknown.
func (s *Store) GetServer(ctx context.Context, view View, id string) (*registryv1.Server, error) {
	tenant, all := view.serverScope()
	srv, err := scanServer(s.pool.QueryRow(ctx, "SELECT "+serverCols+" FROM servers WHERE server_id = $1 AND ("+serverSeen+")", id, all, tenant))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, &NotFoundError{Kind: "server", ID: id}
	}
	return srv, err
}

// serverSeen is the SQL predicate of the servers a [View] may read ($2:
// it sees everything, $3: its tenant): a server that one of the tenant's
// audience classes covers, or one the tenant owns (`<tenant>/...`).
// Another tenant's server is not even confirmed to exist.
const serverSeen = `$2 OR server_id IN (SELECT s.server_id FROM audience_servers s
JOIN audience_classes c ON c.name = s.class_name WHERE c.tenant_id = $3)
OR ($3 <> '' AND split_part(owner, '/', 1) = $3)`

// serverScope is the view as serverSeen's parameters.
func (v View) serverScope() (tenant string, all bool) {
	if v.All {
		return "", true
	}
	return v.Tenant, false
}

// ListServers returns the servers view may read (see serverSeen) ordered
// by id after page.After, whether more follow, and the log revision the
// list was read at.
func (s *Store) ListServers(ctx context.Context, view View, page Page) (servers []*registryv1.Server, hasMore bool, rev int64, err error) {
	tenant, all := view.serverScope()
	err = s.read(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, "SELECT "+serverCols+" FROM servers WHERE server_id > $1 AND ("+serverSeen+") ORDER BY server_id LIMIT $4",
			page.After, all, tenant, page.Limit+1)
		if err != nil {
			return err
		}
		list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*registryv1.Server, error) { return scanServer(r) })
		if err != nil {
			return err
		}
		servers, hasMore = more(list, page.Limit)
		rev, err = changelog.HeadTx(ctx, tx)
		return err
	})
	return servers, hasMore, rev, err
}

// UpdateServer replaces the mutable fields of the server srv names, if it
// is at expectedVersion ([StaleVersionError] otherwise). actor must be a
// platform admin, or a service that only sets an identity pin that is
// still empty (trust on first use); anything else is a [PermissionError].
// A change of trust level bumps the epoch of every tenant covering the
// server. srv must be valid.
func (s *Store) UpdateServer(ctx context.Context, actor principal.Principal, srv *registryv1.Server, expectedVersion int64) (*registryv1.Server, error) {
	var out *registryv1.Server
	err := s.write(ctx, func(u *unit) error {
		stored, err := scanServer(u.tx.QueryRow(ctx, "SELECT "+serverCols+" FROM servers WHERE server_id = $1 FOR NO KEY UPDATE", srv.GetServerId()))
		if errors.Is(err, pgx.ErrNoRows) {
			return &NotFoundError{Kind: "server", ID: srv.GetServerId()}
		}
		if err != nil {
			return err
		}
		if stored.GetVersion() != expectedVersion {
			return &StaleVersionError{Kind: "server", ID: srv.GetServerId(), Expected: expectedVersion, Stored: stored.GetVersion()}
		}
		if !actor.Admin {
			if err := firstUsePin(stored, srv); err != nil {
				return err
			}
		}
		out, err = scanServer(u.tx.QueryRow(ctx, `UPDATE servers SET display_name = $2, description = $3, owner = $4,
	transport = $5, url = $6, command = $7, args = $8, trust_level = $9, revision_source = $10, identity_pin = $11,
	scan_interval_us = $12, pin_dir = $13, version = version + 1, updated_at = now()
WHERE server_id = $1 RETURNING `+serverCols, serverArgs(srv)...))
		if err != nil {
			return fmt.Errorf("update server: %w", err)
		}
		if stored.GetTrustLevel() != out.GetTrustLevel() {
			tenants, err := affectedTenants(ctx, u.tx, out.GetServerId())
			if err != nil {
				return err
			}
			if _, err := u.bump(ctx, tenants, registryv1.PolicyChangeCause_POLICY_CHANGE_CAUSE_SERVER_TRUST); err != nil {
				return err
			}
		}
		u.emitServer(registryv1.ChangeKind_CHANGE_KIND_UPDATED, out)
		return nil
	})
	return out, err
}

// firstUsePin allows a non-admin (service) update only when it sets an
// identity pin that is still empty and changes nothing else.
func firstUsePin(stored, next *registryv1.Server) error {
	if stored.GetIdentityPin() != "" {
		return &PermissionError{Message: "the server's identity pin is already set; only a platform admin may change it"}
	}
	if next.GetIdentityPin() == "" || !sameExceptPin(stored, next) {
		return &PermissionError{Message: "a service may only set a server's empty identity pin (trust on first use); other changes need a platform admin"}
	}
	return nil
}

func sameExceptPin(a, b *registryv1.Server) bool {
	norm := func(s *registryv1.Server) *registryv1.Server {
		c := proto.Clone(s).(*registryv1.Server)
		c.IdentityPin, c.Version, c.CreatedAt, c.UpdatedAt = "", 0, nil, nil
		if c.GetScanInterval().AsDuration() == 0 {
			c.ScanInterval = nil
		}
		return c
	}
	return proto.Equal(norm(a), norm(b))
}

// ReasonServerInUse is the PreconditionError reason of a DeleteServer
// refused while audience classes cover the server.
const ReasonServerInUse = "SERVER_IN_USE"

// DeleteServer deletes the server id if it is at expectedVersion
// ([StaleVersionError] otherwise, [NotFoundError] when unknown) and no
// audience class covers it ([PreconditionError] SERVER_IN_USE, one
// violation per covering class). What the registry derived from
// discovering it goes with it: its tools (each with a DELETED change),
// their approvals and events, and the source pointers and tools discovery
// reported. It returns the server as it was and the deleted tool ids.
func (s *Store) DeleteServer(ctx context.Context, id string, expectedVersion int64) (*registryv1.Server, []string, error) {
	var (
		out   *registryv1.Server
		tools []string
	)
	err := s.write(ctx, func(u *unit) error {
		stored, err := scanServer(u.tx.QueryRow(ctx, "SELECT "+serverCols+" FROM servers WHERE server_id = $1 FOR UPDATE", id))
		if errors.Is(err, pgx.ErrNoRows) {
			return &NotFoundError{Kind: "server", ID: id}
		}
		if err != nil {
			return err
		}
		if stored.GetVersion() != expectedVersion {
			return &StaleVersionError{Kind: "server", ID: id, Expected: expectedVersion, Stored: stored.GetVersion()}
		}
		rows, err := u.tx.Query(ctx, "SELECT class_name FROM audience_servers WHERE server_id = $1 ORDER BY 1 FOR SHARE", id)
		if err != nil {
			return err
		}
		classes, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(classes) > 0 {
			pre := &PreconditionError{Reason: ReasonServerInUse,
				Message: fmt.Sprintf("%d audience classes cover the server; take it out of them first", len(classes))}
			for i, c := range classes {
				pre.Violations.Add(fmt.Sprintf("audience_classes[%d]", i), "audience class %s covers the server", c)
			}
			return pre
		}
		rows, err = u.tx.Query(ctx, "SELECT tool_id FROM tools WHERE server_id = $1 ORDER BY tool_id FOR UPDATE", id)
		if err != nil {
			return err
		}
		if tools, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		if err := endServerStages(ctx, u.tx, id); err != nil {
			return err
		}
		for _, q := range []struct {
			sql string
			arg any
		}{
			{"DELETE FROM tool_events WHERE tool_id = ANY($1)", tools},
			{"DELETE FROM approvals WHERE tool_id = ANY($1)", tools},
			{"DELETE FROM tool_variants WHERE tool_id = ANY($1)", tools},
			{"DELETE FROM tools WHERE server_id = $1", id},
			{"DELETE FROM source_tools WHERE server_id = $1", id},
			{"DELETE FROM source_pointers WHERE server_id = $1", id},
			{"DELETE FROM servers WHERE server_id = $1", id},
		} {
			if _, err := u.tx.Exec(ctx, q.sql, q.arg); err != nil {
				return fmt.Errorf("delete server: %w", err)
			}
		}
		for _, t := range tools {
			u.emitTool(registryv1.ChangeKind_CHANGE_KIND_DELETED, &registryv1.Tool{ToolId: t, ServerId: id}, nil)
		}
		u.emitServer(registryv1.ChangeKind_CHANGE_KIND_DELETED, stored)
		out = stored
		return nil
	})
	return out, tools, err
}
