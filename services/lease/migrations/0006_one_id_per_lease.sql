-- A lease and its execution receipt share one id: the lease id, a UUIDv7
-- made when the lease's claims are, is the execution receipt's primary key
-- (receipt_id) and its lease_id column in text. Before this migration each
-- Issue made two ids and its group commit inserted both into a b-tree of
-- their own (the primary key and lease_id's UNIQUE constraint); Issue's
-- record is the gap between Issue and its floor (DESIGN §9, issue 24), and
-- the second b-tree was one index insert per Issue doing what the primary
-- key already does.
--
-- Lease ids stay unique. A row written from now on has lease_id =
-- receipt_id::text, so the primary key holds its lease id once; and its id
-- is a UUIDv7 made after this migration ran, no smaller than
-- receipt_id_at (below) of the migration's time (both in the check below,
-- which is not validated against the rows already here: they keep their two
-- ids). A row from before holds a UUIDv7 lease id made before this
-- migration ran, whose first 48 bits are its time in milliseconds, so it
-- is smaller than every id the check lets in (or, written by a lease
-- service from before UUIDv7 ids, a random UUID, which a new id equals with
-- odds of about 2^-122). A lease service whose clock is behind the
-- migration's time has its records refused (fails closed) until the clock
-- is right. No query of the service reads by lease_id; an audit by lease
-- id reads `receipt_id = $1::uuid` (rows from now on) or `lease_id = $1`.
ALTER TABLE execution_receipts DROP CONSTRAINT execution_receipts_lease_id_key;

CREATE FUNCTION receipt_id_at(t timestamptz) RETURNS uuid LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  RETURN (lpad(to_hex(floor(extract(epoch FROM t) * 1000)::bigint), 12, '0') || repeat('0', 20))::uuid;

DO $$
BEGIN
  EXECUTE format('ALTER TABLE execution_receipts ADD CONSTRAINT execution_receipts_lease_id_is_receipt_id
    CHECK (lease_id = receipt_id::text AND receipt_id >= %L::uuid) NOT VALID', receipt_id_at(clock_timestamp()));
END
$$;

-- The BRIN index on issued_at (migration 0005) goes too: the primary key is
-- a UUIDv7 whose first 48 bits are the time the lease was made (within
-- milliseconds of issued_at), so the primary key already orders the rows by
-- time, and an audit by time range reads it:
--   WHERE receipt_id >= receipt_id_at($from) AND receipt_id < receipt_id_at($to)
-- (rows whose receipt_id is a UUIDv7: every row from now on, and the rows
-- written since the lease service made UUIDv7 ids; older rows hold random
-- ids, and their time only in issued_at, which an audit of them scans).
-- receipt_id_at is the smallest UUID of the millisecond of t.
DROP INDEX execution_receipts_issued_at;
