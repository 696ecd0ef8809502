-- The execution receipts' (tool_id, issued_at) b-tree is replaced by a BRIN
-- index on issued_at. No query of the service reads by tool; the b-tree was
-- there for audits ("the leases of tool T"), and cost every Issue one more
-- b-tree insert in its group commit (Issue's record is its floor's gap,
-- DESIGN §9). Rows are appended in issued_at order, so a BRIN index keeps
-- an audit by time range cheap (every audit question about leases is
-- bounded by time: a lease lives at most 60 s) at almost no cost per
-- insert; an audit by tool reads the time range and filters.
DROP INDEX execution_receipts_tool;
CREATE INDEX execution_receipts_issued_at ON execution_receipts USING brin (issued_at);
