module github.com/toolcrib/toolcrib/e2e

go 1.26.8

replace (
	github.com/toolcrib/toolcrib/gen => ../gen
	github.com/toolcrib/toolcrib/platform => ../platform
	github.com/toolcrib/toolcrib/services/admission => ../services/admission
	github.com/toolcrib/toolcrib/services/discovery => ../services/discovery
	github.com/toolcrib/toolcrib/services/lease => ../services/lease
	github.com/toolcrib/toolcrib/services/registry => ../services/registry
)
