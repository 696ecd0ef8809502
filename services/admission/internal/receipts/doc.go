// Package receipts writes admission receipts to Postgres in batches off
// the hot path (DESIGN §7) and answers lookups by receipt id.
//
// [Writer.Add] only queues: the receipt is in memory, visible to
// [Writer.Lookup] at once, and written by the flush loop ([Writer.Run]) in
// batches of up to BatchSize, at least every Interval. A failed batch stays
// queued and is retried, so a receipt handed to a caller is never dropped;
// rows are inserted with ON CONFLICT DO NOTHING, so a retried batch that had
// committed writes nothing twice. [Writer.Close] (on drain, after the gRPC
// server stopped) flushes everything left. When MaxPending receipts wait,
// Add refuses ([ErrBackpressure]) rather than answer a Check whose receipt
// could not be kept. A process that is killed loses what it had not
// flushed: the price of keeping the write off the hot path, bounded by
// Interval and BatchSize.
//
// Lookup is principal-bound: a receipt of another tenant or subject is
// [ErrNotFound], exactly as one that does not exist; and short-lived: a
// receipt older than LookupWindow is [ErrNotFound] too (the lease service
// needs only fresh ones). After its batch is stored an ALLOW receipt stays
// readable from memory (the RecentSize newest), so a lookup on the replica
// that decided it reads no Postgres. A receipt another replica decided is in
// Postgres only after that replica's next batch, so a lookup that finds
// nothing re-reads for MissWait (by default three batch intervals) before
// it answers [ErrNotFound]; a replica whose batches fail for longer than
// that leaves its receipts unreadable elsewhere until they are stored
// (the lease service then refuses, and the caller checks again).
package receipts
