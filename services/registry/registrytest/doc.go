// Package registrytest starts a real registry in-process for tests (its Run
// on a loopback port, a fresh database, throwaway credentials), together
// with [Discovery], a fake discovery service the registry follows: tests
// commit catalogs to it and watch the registry pick them up, as it would
// from the real discovery service.
package registrytest
