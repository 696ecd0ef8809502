-- Who asserted a user's confirmation (issue 20): the confirmer's subject,
-- when, and the digest of what the user was shown. Empty (NULL time) for a
-- receipt no confirmer asserted.
ALTER TABLE receipts
  ADD COLUMN confirmer    text        NOT NULL DEFAULT '',
  ADD COLUMN confirmed_at timestamptz,
  ADD COLUMN shown_digest text        NOT NULL DEFAULT '';
