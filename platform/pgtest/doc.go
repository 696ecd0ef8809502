// Package pgtest gives each test its own fresh PostgreSQL database, cloned
// from a template that was migrated once, and drops it when the test ends.
//
// Tests never share state and never touch a database they did not create:
// the template is named after a digest of the migrations it holds
// (`toolcrib_tpl_<schema>_<digest>`), so a changed migration makes a new
// template, and every test database (`toolcrib_test_<random>`) is created
// and dropped by the test that uses it.
//
// The server is TOOLCRIB_TEST_POSTGRES_URL, by default
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable.
package pgtest
