-- A grant's condition (issue 25): a CEL expression that must be true for
-- the grant to count in a Check; empty for none, which is what every
-- existing grant keeps. Kept in the history beside the scopes, so the
-- policy at a past epoch carries the conditions in force then.
ALTER TABLE grants ADD COLUMN condition text NOT NULL DEFAULT '';
ALTER TABLE grant_history ADD COLUMN condition text NOT NULL DEFAULT '';
