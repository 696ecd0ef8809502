package store

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/toolcrib/toolcrib/platform/postgres"
)

// Group commit of execution receipts. Concurrent RecordIssue calls are
// gathered into batches; each batch is one statement, so one transaction
// and one commit: it share-locks the freeze rows of the batch's servers,
// inserts the receipts of the servers not frozen, each claiming its
// admission receipt, and returns their lease ids. When a receipt of the
// batch is claimed already the statement fails whole and the batch runs
// again in the form that skips such rows (a receipt already claimed
// inserts nothing). A RecordIssue returns only once the batch holding its receipt has
// committed (or failed), so no lease is handed out before its receipt is
// durable. A batch that fails whole (a duplicate lease id, a lifetime the
// table refuses) is retried one receipt at a time, so one bad receipt
// fails only its own Issue.

const (
	// maxBatch bounds the receipts of one statement.
	maxBatch = 256
	// maxFlushers bounds the batches in flight at once (each holds a pool
	// connection while it runs).
	maxFlushers = 2
	// flushTimeout bounds one batch: it runs on behalf of many callers, so
	// no single caller's context may cancel it.
	flushTimeout = 10 * time.Second
)

// pendingIssue is one receipt waiting for its batch.
type pendingIssue struct {
	in   Issued
	id   uuid.UUID
	done chan error // buffered, one value
}

type group struct {
	mu       sync.Mutex
	pending  []*pendingIssue
	flushers int
}

// enqueue adds p and starts a flusher when fewer than maxFlushers run.
func (s *Store) enqueue(p *pendingIssue) {
	g := &s.group
	g.mu.Lock()
	g.pending = append(g.pending, p)
	start := g.flushers < maxFlushers
	if start {
		g.flushers++
	}
	g.mu.Unlock()
	if start {
		go s.flush()
	}
}

// flush writes batches until nothing is pending.
func (s *Store) flush() {
	g := &s.group
	for {
		g.mu.Lock()
		n := min(len(g.pending), maxBatch)
		if n == 0 {
			g.flushers--
			g.mu.Unlock()
			return
		}
		batch := make([]*pendingIssue, n)
		copy(batch, g.pending)
		g.pending = append(g.pending[:0], g.pending[n:]...)
		g.mu.Unlock()
		s.writeBatch(batch)
	}
}

func (s *Store) writeBatch(batch []*pendingIssue) {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	recorded, frozen, err := s.insertReceipts(ctx, batch, false)
	if postgres.IsUniqueViolation(err, claimIndex) {
		// A receipt of the batch was claimed already (a second Issue on
		// it, or a concurrent one that committed first): the same batch
		// again, now skipping the rows whose claim is taken.
		recorded, frozen, err = s.insertReceipts(ctx, batch, true)
	}
	if err != nil && len(batch) > 1 {
		for _, p := range batch {
			s.writeBatch([]*pendingIssue{p})
		}
		return
	}
	for _, p := range batch {
		switch {
		case err != nil:
			p.done <- err
		case recorded[p.in.Claims.ID]:
			p.done <- nil
		case frozen[p.in.Claims.Server]:
			p.done <- &FrozenError{Server: p.in.Claims.Server}
		default:
			p.done <- ErrReceiptUsed
		}
	}
}

// claimIndex is the unique index that lets one execution receipt claim an
// admission receipt (migration 0004).
const claimIndex = "execution_receipts_one_per_admission_receipt"

// insertReceipts is the one statement of a batch; it returns the lease ids
// recorded and the batch's servers that are frozen (a receipt neither
// recorded nor of a frozen server names an admission receipt already
// claimed). Without skipTaken the statement is a plain insert, which fails
// whole (a unique violation of [claimIndex]) when one of its receipts is
// claimed already; with it, ON CONFLICT skips those rows. A second Issue on
// a receipt is rare, and the plain insert costs Postgres less per row than
// the speculative insertion ON CONFLICT does on every one (issue 24: the
// record is what Issue pays over its floor), so the batch tries it first.
func (s *Store) insertReceipts(ctx context.Context, batch []*pendingIssue, skipTaken bool) (recorded, frozen map[string]bool, err error) {
	n := len(batch)
	var (
		receiptIDs                                                 = make([]string, n)
		leaseIDs, admission, subjects, tenants, tools, servers     = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		classes, descriptors, argDigests, audiences, holders, kids = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		generations, epochs                                        = make([]int64, n), make([]int64, n)
		issuedAt, expiresAt                                        = make([]time.Time, n), make([]time.Time, n)
	)
	for i, p := range batch {
		c := p.in.Claims
		receiptIDs[i], leaseIDs[i], admission[i], subjects[i], tenants[i] = p.id.String(), c.ID, c.Receipt, c.Subject, c.Tenant
		tools[i], servers[i], classes[i], descriptors[i] = c.Tool, c.Server, c.AudienceClass, c.DescriptorDigest
		generations[i], epochs[i], argDigests[i], audiences[i] = c.Generation, c.PolicyEpoch, c.ArgumentDigest, c.Audience
		holders[i], kids[i], issuedAt[i], expiresAt[i] = c.HolderThumbprint, p.in.KeyID, c.IssuedAt, c.ExpiresAt
	}
	// The freeze rows are read FOR SHARE whatever their state, so a Freeze
	// of one of these servers waits for this commit, and this statement
	// waits for (and then sees) a Freeze already under way. The aggregate
	// reads every row, so every one is locked. Each row claims its
	// admission receipt: the plain insert fails whole on a receipt a
	// committed row (or one earlier in this statement) claims; the skipping
	// form skips that row instead. Both wait for a concurrent transaction
	// that inserted the same claim (and fail or skip if it commits).
	q := insertReceiptsSQL
	if skipTaken {
		q = insertReceiptsSkippingTakenSQL
	}
	rows, err := s.pool.Query(ctx, q,
		receiptIDs, leaseIDs, admission, subjects, tenants, tools, servers, classes, descriptors,
		generations, epochs, argDigests, audiences, holders, kids, issuedAt, expiresAt)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	recorded, frozen = make(map[string]bool, n), map[string]bool{}
	for rows.Next() {
		var id string
		var isFrozen bool
		if err := rows.Scan(&id, &isFrozen); err != nil {
			return nil, nil, err
		}
		if isFrozen {
			frozen[id] = true
		} else {
			recorded[id] = true
		}
	}
	return recorded, frozen, rows.Err()
}

// insertReceiptsSQL is the batch's statement; the skipping form adds ON
// CONFLICT on [claimIndex] (see [Store.insertReceipts]).
var (
	insertReceiptsSQL              = insertReceiptsWith("")
	insertReceiptsSkippingTakenSQL = insertReceiptsWith("ON CONFLICT (admission_receipt_id) WHERE claims_receipt DO NOTHING")
)

func insertReceiptsWith(onConflict string) string {
	return `WITH frozen AS (
  SELECT coalesce(array_agg(f.server_id) FILTER (WHERE f.frozen), '{}') AS ids
  FROM (SELECT server_id, frozen FROM freezes WHERE server_id = ANY($7::text[]) FOR SHARE) f
), ins AS (
INSERT INTO execution_receipts (receipt_id, lease_id, admission_receipt_id, subject, tenant_id,
  tool_id, server_id, audience_class, descriptor_digest, generation, policy_epoch, argument_digest, audience,
  holder_thumbprint, key_id, issued_at, expires_at, claims_receipt)
SELECT u.*, true FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
  $9::text[], $10::bigint[], $11::bigint[], $12::text[], $13::text[], $14::text[], $15::text[], $16::timestamptz[],
  $17::timestamptz[]) AS u(receipt_id, lease_id, admission_receipt_id, subject, tenant_id, tool_id, server_id,
  audience_class, descriptor_digest, generation, policy_epoch, argument_digest, audience, holder_thumbprint, key_id,
  issued_at, expires_at)
WHERE NOT (u.server_id = ANY ((SELECT ids FROM frozen)::text[]))
` + onConflict + `
RETURNING lease_id)
SELECT lease_id, false FROM ins
UNION ALL SELECT unnest(ids), true FROM frozen`
}
