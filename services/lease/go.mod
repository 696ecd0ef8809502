module github.com/toolcrib/toolcrib/services/lease

go 1.26.8

replace (
	github.com/toolcrib/toolcrib/gen => ../../gen
	github.com/toolcrib/toolcrib/platform => ../../platform
)
