-- The grant whose condition admitted an ALLOW (issue 25),
-- `subject:<sub>` or `group:<group>`; empty when a grant without a
-- condition gave the scope and class, and on every denial.
ALTER TABLE receipts ADD COLUMN admitting_grant text NOT NULL DEFAULT '';
