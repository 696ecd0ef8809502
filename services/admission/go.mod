module github.com/toolcrib/toolcrib/services/admission

go 1.26.8

replace (
	github.com/toolcrib/toolcrib/gen => ../../gen
	github.com/toolcrib/toolcrib/platform => ../../platform
)
