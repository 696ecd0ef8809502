ALTER TABLE items ADD COLUMN note text;
