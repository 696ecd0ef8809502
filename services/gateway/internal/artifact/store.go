package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotFound is returned for an artifact that does not exist, has
// expired, or belongs to another tenant.
var ErrNotFound = errors.New("artifact: not found")

// URIPrefix starts every artifact's resource URI.
const URIPrefix = "toolcrib-artifact://"

// Artifact is one stored result (its body only in [Store.Get]).
type Artifact struct {
	ID        string
	Tenant    string
	Subject   string
	ToolID    string
	ReceiptID string
	MIMEType  string
	Size      int64
	SHA256    string
	CreatedAt time.Time
	ExpiresAt time.Time
	Body      []byte
}

// URI is the artifact's MCP resource URI.
func (a Artifact) URI() string { return URIPrefix + a.ID }

// IDFromURI returns the artifact id of a resource URI, or false when uri is
// not an artifact URI.
func IDFromURI(uri string) (string, bool) {
	id, ok := strings.CutPrefix(uri, URIPrefix)
	if !ok {
		return "", false
	}
	if _, err := uuid.Parse(id); err != nil {
		return "", false
	}
	return id, true
}

// Digest is the `sha256:<hex>` of body.
func Digest(body []byte) string {
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Store keeps artifacts in the gateway's schema.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// New returns a store on pool (search_path = the gateway schema).
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool, now: time.Now} }

// Put stores body for a's tenant, subject and tool, kept for retention,
// and returns the artifact with its id, size, digest and times.
func (s *Store) Put(ctx context.Context, a Artifact, retention time.Duration) (Artifact, error) {
	if a.Tenant == "" || a.Subject == "" || a.ToolID == "" {
		return Artifact{}, errors.New("artifact: tenant, subject and tool are required")
	}
	a.ID = uuid.NewString()
	a.Size = int64(len(a.Body))
	a.SHA256 = Digest(a.Body)
	a.CreatedAt = s.now().UTC().Truncate(time.Microsecond)
	a.ExpiresAt = a.CreatedAt.Add(retention)
	_, err := s.pool.Exec(ctx, `INSERT INTO artifacts (artifact_id, tenant_id, subject, tool_id, receipt_id, mime_type,
size_bytes, sha256, body, created_at, expires_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)`,
		a.ID, a.Tenant, a.Subject, a.ToolID, a.ReceiptID, a.MIMEType, a.Size, a.SHA256, a.Body, a.CreatedAt, a.ExpiresAt)
	if err != nil {
		return Artifact{}, fmt.Errorf("artifact: put: %w", err)
	}
	return a, nil
}

// Get returns tenant's unexpired artifact id with its body; ErrNotFound
// for any other.
func (s *Store) Get(ctx context.Context, tenant, id string) (Artifact, error) {
	a := Artifact{ID: id, Tenant: tenant}
	err := s.pool.QueryRow(ctx, `SELECT subject, tool_id, receipt_id, mime_type, size_bytes, sha256, body, created_at, expires_at
FROM artifacts WHERE artifact_id = $1 AND tenant_id = $2 AND expires_at > $3`, id, tenant, s.now()).
		Scan(&a.Subject, &a.ToolID, &a.ReceiptID, &a.MIMEType, &a.Size, &a.SHA256, &a.Body, &a.CreatedAt, &a.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Artifact{}, ErrNotFound
	}
	if err != nil {
		return Artifact{}, fmt.Errorf("artifact: get: %w", err)
	}
	return a, nil
}

// List returns at most limit of tenant's unexpired artifacts, newest
// first, without bodies.
func (s *Store) List(ctx context.Context, tenant string, limit int) ([]Artifact, error) {
	rows, err := s.pool.Query(ctx, `SELECT artifact_id, subject, tool_id, receipt_id, mime_type, size_bytes, sha256, created_at, expires_at
FROM artifacts WHERE tenant_id = $1 AND expires_at > $2 ORDER BY created_at DESC, artifact_id LIMIT $3`, tenant, s.now(), limit)
	if err != nil {
		return nil, fmt.Errorf("artifact: list: %w", err)
	}
	defer rows.Close()
	var out []Artifact
	for rows.Next() {
		a := Artifact{Tenant: tenant}
		if err := rows.Scan(&a.ID, &a.Subject, &a.ToolID, &a.ReceiptID, &a.MIMEType, &a.Size, &a.SHA256, &a.CreatedAt, &a.ExpiresAt); err != nil {
			return nil, fmt.Errorf("artifact: list: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// Delete removes tenant's artifact id; ErrNotFound when tenant has none
// by that id.
func (s *Store) Delete(ctx context.Context, tenant, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM artifacts WHERE artifact_id = $1 AND tenant_id = $2`, id, tenant)
	if err != nil {
		return fmt.Errorf("artifact: delete: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// Sweep deletes expired artifacts and returns how many.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM artifacts WHERE expires_at <= $1`, s.now())
	if err != nil {
		return 0, fmt.Errorf("artifact: sweep: %w", err)
	}
	return tag.RowsAffected(), nil
}

// SetClock replaces the store's clock (tests).
func (s *Store) SetClock(now func() time.Time) { s.now = now }
