-- One lease per admission receipt (DESIGN §7a), held by the execution
-- receipts themselves: Issue records its execution receipt with
-- claims_receipt set, and the unique index lets at most one such row name
-- an admission receipt, across every lease replica and durably (the claim
-- used to be a Redis SET NX before the commit: one more round trip per
-- Issue, and forgotten by a Redis that restarts without persistence).
-- Rows written before this migration hold no claim (they were claimed in
-- Redis), so the index cannot fail on them.
ALTER TABLE execution_receipts
  ADD COLUMN claims_receipt boolean NOT NULL DEFAULT false,
  ADD CONSTRAINT execution_receipts_claim_names_a_receipt CHECK (NOT claims_receipt OR admission_receipt_id <> '');

CREATE UNIQUE INDEX execution_receipts_one_per_admission_receipt
  ON execution_receipts (admission_receipt_id) WHERE claims_receipt;
