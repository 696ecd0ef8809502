-- A lease and its execution receipt share one id: the lease id, a UUIDv7
-- made when the lease's claims are, is the execution receipt's primary key
-- (receipt_id) and its lease_id column in text. Before this migration each
-- Issue made two ids and its group commit inserted both into a b-tree of
-- their own (the primary key and lease_id's UNIQUE constraint); Issue's
-- record is the gap between Issue and its floor (DESIGN §9, issue 24), and
-- the second b-tree was one index insert per Issue doing what the primary
-- key already does.
--
-- Rows with two ids remain: those written before this migration, and those
-- an older lease replica writes while the replicas are rolled after it ran
-- (docs/operating/upgrades.md: migrate, then roll), so nothing here refuses
-- them. lease_id's uniqueness is kept by the primary key for rows with one
-- id, and by a partial unique index holding only the rows with two ids;
-- a row with one id is not written to that index. A lease id of a row with
-- one id could equal one of a row with two ids only if two independently
-- made UUIDv7s were equal (the same millisecond and 74 random bits); and a
-- shared lease id fails closed (a revocation by lease id reaches both, a
-- single use by lease id refuses the second).
ALTER TABLE execution_receipts DROP CONSTRAINT execution_receipts_lease_id_key;
CREATE UNIQUE INDEX execution_receipts_two_id_lease_id ON execution_receipts (lease_id)
  WHERE lease_id <> receipt_id::text;

-- The BRIN index on issued_at (migration 0005) goes too: the primary key is
-- a UUIDv7 whose first 48 bits are the time it was made (for a row with one
-- id the lease's, within milliseconds of issued_at; for a row with two ids
-- the record's, just after), so the primary key already orders the rows by
-- time, and an audit by time range reads it:
--   WHERE receipt_id >= receipt_id_at($from) AND receipt_id < receipt_id_at($to)
-- (rows whose receipt_id is a UUIDv7: every row from now on, and the rows
-- written since the lease service made UUIDv7 ids; older rows hold random
-- ids, and their time only in issued_at, which an audit of them scans).
-- receipt_id_at is the smallest UUID of the millisecond of t.
DROP INDEX execution_receipts_issued_at;

CREATE FUNCTION receipt_id_at(t timestamptz) RETURNS uuid LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  RETURN (lpad(to_hex(floor(extract(epoch FROM t) * 1000)::bigint), 12, '0') || repeat('0', 20))::uuid;
