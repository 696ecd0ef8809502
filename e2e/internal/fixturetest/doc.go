// Package fixturetest holds test helpers for the fixture, oracle and
// scenario tests: starting fixtures in a test, reaching them, and a naive
// walker that pages through a fixture the way the oracle's reference crawl
// does, so those packages can produce real mutation logs without the
// discovery crawler. It is internal to e2e, is not a crawler and judges
// nothing.
package fixturetest
