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
// expired, or belongs to another principal.
var ErrNotFound = errors.New("artifact: not found")

// ErrQuotaExceeded is what every [*QuotaError] wraps.
var ErrQuotaExceeded = errors.New("artifact: tenant quota exceeded")

// Owner is the principal an artifact belongs to: its tenant and subject.
type Owner struct {
	Tenant  string
	Subject string
}

// Quota bounds one tenant's unexpired artifacts; a Put that would take
// the tenant past either bound is refused whole.
type Quota struct {
	// Bytes bounds the sum of their sizes.
	Bytes int64
	// Count bounds their number.
	Count int64
}

// Which quota a [QuotaError] names.
const (
	QuotaBytes = "bytes"
	QuotaCount = "count"
)

// QuotaError is a Put refused because the tenant's artifacts would exceed
// a quota. It names the quota, never another principal's artifacts.
type QuotaError struct {
	// Which is [QuotaBytes] or [QuotaCount].
	Which string
	// Limit is that quota's value.
	Limit int64
	// Size is the refused artifact's size in bytes.
	Size int64
}

func (e *QuotaError) Error() string {
	if e.Which == QuotaCount {
		return fmt.Sprintf("artifact: the tenant already holds its quota of %d artifacts", e.Limit)
	}
	return fmt.Sprintf("artifact: %d more bytes would take the tenant's artifacts over its quota of %d bytes", e.Size, e.Limit)
}

// Unwrap makes a QuotaError match [ErrQuotaExceeded].
func (e *QuotaError) Unwrap() error { return ErrQuotaExceeded }

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
// and returns the artifact with its id, size, digest and times. In one
// transaction it locks the tenant's row of artifact_tenants, sums the
// tenant's unexpired artifacts and inserts only when the new one keeps
// both within quota; otherwise it returns a [*QuotaError] and stores
// nothing. The row lock serializes the check across concurrent calls and
// gateway replicas.
func (s *Store) Put(ctx context.Context, a Artifact, retention time.Duration, quota Quota) (Artifact, error) {
	if a.Tenant == "" || a.Subject == "" || a.ToolID == "" {
		return Artifact{}, errors.New("artifact: tenant, subject and tool are required")
	}
	if quota.Bytes <= 0 || quota.Count <= 0 {
		return Artifact{}, errors.New("artifact: the quota must be positive")
	}
	a.ID = uuid.NewString()
	a.Size = int64(len(a.Body))
	a.SHA256 = Digest(a.Body)
	a.CreatedAt = s.now().UTC().Truncate(time.Microsecond)
	a.ExpiresAt = a.CreatedAt.Add(retention)
	if a.Size > quota.Bytes {
		return Artifact{}, &QuotaError{Which: QuotaBytes, Limit: quota.Bytes, Size: a.Size}
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO artifact_tenants (tenant_id) VALUES ($1)
ON CONFLICT (tenant_id) DO UPDATE SET tenant_id = EXCLUDED.tenant_id`, a.Tenant); err != nil {
			return err
		}
		var bytes, count int64
		if err := tx.QueryRow(ctx, `SELECT coalesce(sum(size_bytes), 0)::bigint, count(*) FROM artifacts
WHERE tenant_id = $1 AND expires_at > $2`, a.Tenant, a.CreatedAt).Scan(&bytes, &count); err != nil {
			return err
		}
		if count+1 > quota.Count {
			return &QuotaError{Which: QuotaCount, Limit: quota.Count, Size: a.Size}
		}
		if bytes+a.Size > quota.Bytes {
			return &QuotaError{Which: QuotaBytes, Limit: quota.Bytes, Size: a.Size}
		}
		_, err := tx.Exec(ctx, `INSERT INTO artifacts (artifact_id, tenant_id, subject, tool_id, receipt_id, mime_type,
size_bytes, sha256, body, created_at, expires_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)`,
			a.ID, a.Tenant, a.Subject, a.ToolID, a.ReceiptID, a.MIMEType, a.Size, a.SHA256, a.Body, a.CreatedAt, a.ExpiresAt)
		return err
	})
	var qe *QuotaError
	if errors.As(err, &qe) {
		return Artifact{}, qe
	}
	if err != nil {
		return Artifact{}, fmt.Errorf("artifact: put: %w", err)
	}
	return a, nil
}

// Get returns owner's unexpired artifact id with its body; ErrNotFound
// for any other (another principal's, expired, or none).
func (s *Store) Get(ctx context.Context, owner Owner, id string) (Artifact, error) {
	a := Artifact{ID: id, Tenant: owner.Tenant, Subject: owner.Subject}
	err := s.pool.QueryRow(ctx, `SELECT tool_id, receipt_id, mime_type, size_bytes, sha256, body, created_at, expires_at
FROM artifacts WHERE artifact_id = $1 AND tenant_id = $2 AND subject = $3 AND expires_at > $4`, id, owner.Tenant, owner.Subject, s.now()).
		Scan(&a.ToolID, &a.ReceiptID, &a.MIMEType, &a.Size, &a.SHA256, &a.Body, &a.CreatedAt, &a.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Artifact{}, ErrNotFound
	}
	if err != nil {
		return Artifact{}, fmt.Errorf("artifact: get: %w", err)
	}
	return a, nil
}

// List returns at most limit of owner's unexpired artifacts, newest
// first, without bodies.
func (s *Store) List(ctx context.Context, owner Owner, limit int) ([]Artifact, error) {
	rows, err := s.pool.Query(ctx, `SELECT artifact_id, tool_id, receipt_id, mime_type, size_bytes, sha256, created_at, expires_at
FROM artifacts WHERE tenant_id = $1 AND subject = $2 AND expires_at > $3 ORDER BY created_at DESC, artifact_id LIMIT $4`,
		owner.Tenant, owner.Subject, s.now(), limit)
	if err != nil {
		return nil, fmt.Errorf("artifact: list: %w", err)
	}
	defer rows.Close()
	var out []Artifact
	for rows.Next() {
		a := Artifact{Tenant: owner.Tenant, Subject: owner.Subject}
		if err := rows.Scan(&a.ID, &a.ToolID, &a.ReceiptID, &a.MIMEType, &a.Size, &a.SHA256, &a.CreatedAt, &a.ExpiresAt); err != nil {
			return nil, fmt.Errorf("artifact: list: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// Delete removes owner's artifact id; ErrNotFound when owner has none by
// that id.
func (s *Store) Delete(ctx context.Context, owner Owner, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM artifacts WHERE artifact_id = $1 AND tenant_id = $2 AND subject = $3`, id, owner.Tenant, owner.Subject)
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
