module github.com/toolcrib/toolcrib/revision

go 1.26.8

require (
	github.com/go-jose/go-jose/v4 v4.1.9
	github.com/hashicorp/golang-lru/v2 v2.0.7
	github.com/modelcontextprotocol/go-sdk v1.8.0
	github.com/toolcrib/toolcrib/platform v0.0.0-00010101000000-000000000000
)

require (
	github.com/google/jsonschema-go v0.4.3 // indirect
	github.com/segmentio/asm v1.1.3 // indirect
	github.com/segmentio/encoding v0.5.4 // indirect
	github.com/yosida95/uritemplate/v3 v3.0.2 // indirect
	golang.org/x/oauth2 v0.38.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)

replace github.com/toolcrib/toolcrib/platform => ../platform

replace github.com/modelcontextprotocol/go-sdk => ../third_party/go-sdk
