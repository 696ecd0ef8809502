// Package redisclient opens the go-redis client services share, with every
// key under a configured prefix so several deployments (or tests) can share
// one Redis without seeing each other's keys.
package redisclient
