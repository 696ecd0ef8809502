package mcpapi

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/services/gateway/internal/artifact"
)

// maxListedArtifacts bounds resources/list.
const maxListedArtifacts = 100

// listArtifacts answers resources/list with the principal's tenant's
// newest artifacts.
func (g *Gateway) listArtifacts(ctx context.Context, st *state, _ *mcp.ListResourcesRequest) (*mcp.ListResourcesResult, error) {
	if st.p.Tenant == "" {
		return &mcp.ListResourcesResult{Resources: []*mcp.Resource{}}, nil
	}
	list, err := g.opts.Artifacts.List(ctx, st.p.Tenant, maxListedArtifacts)
	if err != nil {
		return nil, fmt.Errorf("the artifact store did not answer")
	}
	res := &mcp.ListResourcesResult{Resources: make([]*mcp.Resource, 0, len(list)),
		Cacheable: mcp.Cacheable{CacheScope: "private"}}
	for _, a := range list {
		res.Resources = append(res.Resources, &mcp.Resource{URI: a.URI(), Name: "result of " + a.ToolID, MIMEType: a.MIMEType, Size: a.Size,
			Description: fmt.Sprintf("%d bytes, %s, stored %s, kept until %s", a.Size, a.SHA256,
				a.CreatedAt.Format("2006-01-02T15:04:05Z"), a.ExpiresAt.Format("2006-01-02T15:04:05Z"))})
	}
	return res, nil
}

// readArtifact answers resources/read for an artifact of the principal's
// tenant; any other URI, or another tenant's artifact, is not found.
func (g *Gateway) readArtifact(ctx context.Context, st *state, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	var uri string
	if req.Params != nil {
		uri = req.Params.URI
	}
	id, ok := artifact.IDFromURI(uri)
	if !ok || st.p.Tenant == "" {
		return nil, mcp.ResourceNotFoundError(bounded(uri, 256))
	}
	a, err := g.opts.Artifacts.Get(ctx, st.p.Tenant, id)
	if errors.Is(err, artifact.ErrNotFound) {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, fmt.Errorf("the artifact store did not answer")
	}
	c := &mcp.ResourceContents{URI: a.URI(), MIMEType: a.MIMEType}
	if utf8.Valid(a.Body) {
		c.Text = string(a.Body)
	} else {
		c.Blob = a.Body
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}, Cacheable: mcp.Cacheable{CacheScope: "private"}}, nil
}
