package mcpapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/services/gateway/internal/artifact"
	"github.com/toolcrib/toolcrib/services/gateway/internal/bearer"
)

// maxListedArtifacts bounds resources/list.
const maxListedArtifacts = 100

// listResources answers resources/list: the principal's tenant's newest
// artifacts, then the resources of the servers behind its visible set.
func (g *Gateway) listResources(ctx context.Context, st *state, req *mcp.ListResourcesRequest) (*mcp.ListResourcesResult, error) {
	res := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}, Cacheable: mcp.Cacheable{CacheScope: "private"}}
	if st.p.Tenant != "" {
		list, err := g.opts.Artifacts.List(ctx, st.p.Tenant, maxListedArtifacts)
		if err != nil {
			return nil, fmt.Errorf("the artifact store did not answer")
		}
		for _, a := range list {
			res.Resources = append(res.Resources, &mcp.Resource{URI: a.URI(), Name: "result of " + a.ToolID, MIMEType: a.MIMEType, Size: a.Size,
				Description: fmt.Sprintf("%d bytes, %s, stored %s, kept until %s", a.Size, a.SHA256,
					a.CreatedAt.Format("2006-01-02T15:04:05Z"), a.ExpiresAt.Format("2006-01-02T15:04:05Z"))})
		}
	}
	_, tok, ok := bearer.From(req.GetExtra().TokenInfo)
	if !ok {
		return res, nil
	}
	up, err := g.upstreamResources(ctx, st, tok)
	if err != nil {
		return nil, unavailableList(err)
	}
	res.Resources = append(res.Resources, up...)
	return res, nil
}

func isGatewayURI(uri string) bool {
	return strings.HasPrefix(uri, artifact.URIPrefix) || strings.HasPrefix(uri, upstreamURIPrefix)
}

// readArtifact answers resources/read: an artifact of the principal's
// tenant (another tenant's is not found), or an upstream resource.
func (g *Gateway) readArtifact(ctx context.Context, st *state, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	var uri string
	if req.Params != nil {
		uri = req.Params.URI
	}
	if !strings.HasPrefix(uri, artifact.URIPrefix) {
		return g.readUpstream(ctx, st, req, uri)
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
