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

// owner is the principal st's artifacts belong to.
func (st *state) owner() artifact.Owner {
	return artifact.Owner{Tenant: st.p.Tenant, Subject: st.p.Subject}
}

// visibleToolIDs reads the principal's visible set afresh (admission's
// ListVisibleTools: a revoked grant shows at once) and returns the tool
// ids in it.
func (g *Gateway) visibleToolIDs(ctx context.Context, st *state, tok string) (map[string]bool, error) {
	set, err := g.sync(ctx, st, tok)
	if err != nil {
		return nil, err
	}
	ids := make(map[string]bool, len(set.tools))
	for _, t := range set.tools {
		if t.rt != nil {
			ids[t.rt.GetToolId()] = true
		}
	}
	return ids, nil
}

// listResources answers resources/list: the principal's own newest
// artifacts of tools it may still see, then the resources of the servers
// behind its visible set.
func (g *Gateway) listResources(ctx context.Context, st *state, req *mcp.ListResourcesRequest) (*mcp.ListResourcesResult, error) {
	res := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}, Cacheable: mcp.Cacheable{CacheScope: "private"}}
	_, tok, ok := bearer.From(req.GetExtra().TokenInfo)
	if !ok {
		return res, nil
	}
	if st.p.Tenant != "" && st.p.Subject != "" {
		list, err := g.opts.Artifacts.List(ctx, st.owner(), maxListedArtifacts)
		if err != nil {
			return nil, fmt.Errorf("the artifact store did not answer")
		}
		if len(list) > 0 {
			visible, err := g.visibleToolIDs(ctx, st, tok)
			if err != nil {
				return nil, unavailableList(err)
			}
			for _, a := range list {
				if !visible[a.ToolID] {
					continue
				}
				res.Resources = append(res.Resources, &mcp.Resource{URI: a.URI(), Name: "result of " + a.ToolID, MIMEType: a.MIMEType, Size: a.Size,
					Description: fmt.Sprintf("%d bytes, %s, stored %s, kept until %s", a.Size, a.SHA256,
						a.CreatedAt.Format("2006-01-02T15:04:05Z"), a.ExpiresAt.Format("2006-01-02T15:04:05Z"))})
			}
		}
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

// artifactNotFound is the one answer for an artifact the principal may
// not read, whatever the cause (malformed id, none by that id, another
// principal's, expired, or of a tool it no longer sees): the same error
// with the same text, so an answer never tells whether the id exists.
func artifactNotFound(uri string) error { return mcp.ResourceNotFoundError(bounded(uri, 256)) }

// readArtifact answers resources/read: an artifact of the principal
// (tenant and subject) whose call made it, while the principal may still
// see the tool it came from; any other artifact URI is not found, exactly
// as one that never existed. Other URIs are upstream resources.
func (g *Gateway) readArtifact(ctx context.Context, st *state, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	var uri string
	if req.Params != nil {
		uri = req.Params.URI
	}
	if !strings.HasPrefix(uri, artifact.URIPrefix) {
		return g.readUpstream(ctx, st, req, uri)
	}
	id, ok := artifact.IDFromURI(uri)
	_, tok, hasToken := bearer.From(req.GetExtra().TokenInfo)
	if !ok || !hasToken || st.p.Tenant == "" || st.p.Subject == "" {
		return nil, artifactNotFound(uri)
	}
	a, err := g.opts.Artifacts.Get(ctx, st.owner(), id)
	if errors.Is(err, artifact.ErrNotFound) {
		return nil, artifactNotFound(uri)
	}
	if err != nil {
		return nil, fmt.Errorf("the artifact store did not answer")
	}
	visible, err := g.visibleToolIDs(ctx, st, tok)
	if err != nil {
		return nil, unavailableList(err)
	}
	if !visible[a.ToolID] {
		return nil, artifactNotFound(uri)
	}
	c := &mcp.ResourceContents{URI: a.URI(), MIMEType: a.MIMEType}
	if utf8.Valid(a.Body) {
		c.Text = string(a.Body)
	} else {
		c.Blob = a.Body
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}, Cacheable: mcp.Cacheable{CacheScope: "private"}}, nil
}
