module github.com/toolcrib/toolcrib/cli

go 1.26.8

replace (
	github.com/toolcrib/toolcrib/gen => ../gen
	github.com/toolcrib/toolcrib/platform => ../platform
	github.com/toolcrib/toolcrib/services/admission => ../services/admission
	github.com/toolcrib/toolcrib/services/discovery => ../services/discovery
	github.com/toolcrib/toolcrib/services/lease => ../services/lease
	github.com/toolcrib/toolcrib/services/registry => ../services/registry
)

require (
	github.com/toolcrib/toolcrib/platform v0.0.0-00010101000000-000000000000
	golang.org/x/sync v0.25.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/go-jose/go-jose/v4 v4.1.9 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)
