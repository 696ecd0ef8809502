CREATE TABLE items (id integer PRIMARY KEY, name text NOT NULL);
