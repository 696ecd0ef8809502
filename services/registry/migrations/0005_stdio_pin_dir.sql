-- A stdio server's pinned directory (issue 20.8): an absolute path whose
-- tree is part of the server's identity. Empty pins no directory, which is
-- what every existing server keeps.
ALTER TABLE servers ADD COLUMN pin_dir text NOT NULL DEFAULT '';
