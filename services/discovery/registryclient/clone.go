package registryclient

import (
	"google.golang.org/protobuf/proto"

	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
)

func cloneServer(s *registryv1.Server) *registryv1.Server {
	return proto.Clone(s).(*registryv1.Server)
}
