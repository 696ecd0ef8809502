CREATE TABLE items (id integer PRIMARY KEY, label text NOT NULL);
