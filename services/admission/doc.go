// Package admission will hold the admission service (DESIGN §7): the
// AdmissionService.Check decision made before every tool call and
// ListVisibleTools. Its API is defined in proto/toolcrib/admission/v1; the
// service itself is not implemented yet, so `make run` does not start it.
package admission
