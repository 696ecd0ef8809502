module github.com/toolcrib/toolcrib/services/lease

go 1.26.8

replace (
	github.com/toolcrib/toolcrib/gen => ../../gen
	github.com/toolcrib/toolcrib/platform => ../../platform
	github.com/toolcrib/toolcrib/revision => ../../revision
)

require (
	github.com/toolcrib/toolcrib/platform v0.0.0-00010101000000-000000000000
	github.com/toolcrib/toolcrib/revision v0.0.0-00010101000000-000000000000
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-jose/go-jose/v4 v4.1.9 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
