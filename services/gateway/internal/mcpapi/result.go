package mcpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/revision/lease"
	"github.com/toolcrib/toolcrib/services/gateway/internal/artifact"
	"github.com/toolcrib/toolcrib/services/gateway/internal/directory"
	"github.com/toolcrib/toolcrib/services/gateway/internal/policy"
)

// MetaArtifact is the `_meta` key of a result stored as an artifact: its
// URI, size and digest.
const MetaArtifact = "dev.toolcrib/artifact"

// MetaUpstreamErrorCode is the `_meta` key naming the upstream's error
// code of an error result the result policy withheld.
const MetaUpstreamErrorCode = "dev.toolcrib/upstream-error-code"

// ReasonArtifactQuota: the result is over the budget and storing it as an
// artifact would take the tenant past its artifact quota (bytes or
// count); the result is withheld, never truncated.
const ReasonArtifactQuota = "ARTIFACT_QUOTA_EXCEEDED"

// maxLoggedErrorText bounds the upstream error text logged at debug.
const maxLoggedErrorText = 512

// applyPolicy turns the upstream's result into the answer. Every result
// goes through the contract's result policy: under a contract with
// allowed fields an error result becomes a generic error naming only the
// upstream's error code (its text goes to the debug log, bounded) and a
// result without structured content is refused; otherwise an error result
// passes through and a successful one is projected to the allowed fields,
// checked for required evidence and validated against the output schema.
// Then a result over the contract's budget (the gateway's when the
// contract sets none) becomes an artifact with a preview.
func (g *Gateway) applyPolicy(ctx context.Context, st *state, toolID, receiptID string, review directory.Review,
	desc *directory.Descriptor, up *mcp.CallToolResult) (*mcp.CallToolResult, string, string) {
	out := &mcp.CallToolResult{IsError: up.IsError, Content: up.Content, Meta: mcp.Meta{}}
	var structured json.RawMessage
	if up.StructuredContent != nil {
		b, err := json.Marshal(up.StructuredContent)
		if err != nil {
			return denial(policy.ReasonNotObject, "structured content cannot be encoded", ""), outcomeRefused, policy.ReasonNotObject
		}
		structured = b
	}
	c := review.Contract
	rules := policy.Rules{AllowedFields: c.GetAllowedFields(), RequiredEvidence: c.GetRequiredEvidence(), Output: desc.Output}
	if up.IsError {
		code := policy.ErrorCode(up.Meta[lease.MetaFailure], structured)
		if refusal := rules.UpstreamError(code); refusal != nil {
			g.opts.Logger.DebugContext(ctx, "upstream error result withheld by the result policy", "tenant", st.p.Tenant, "subject", st.p.Subject,
				"tool", toolID, "code", code, "text", bounded(resultText(up), maxLoggedErrorText))
			res := denial(refusal.Reason, refusal.Detail, "")
			if code != "" {
				res.Meta[MetaUpstreamErrorCode] = code
			}
			return res, outcomeOK, refusal.Reason
		}
		// The upstream refused (e.g. the executor kit refused the lease) or
		// failed; keep its failure name when it gave one.
		if f, ok := up.Meta[lease.MetaFailure].(string); ok {
			out.Meta[MetaReason] = bounded(f, 64)
		}
	} else {
		o, refusal := rules.Apply(structured)
		if refusal != nil {
			return denial(refusal.Reason, refusal.Detail, "the tool's result does not meet its owner's result policy; it was withheld"), outcomeRefused, refusal.Reason
		}
		if o.Structured != nil {
			out.StructuredContent = o.Structured
			if rules.Restricts() {
				// The text may carry what the projection dropped: the model
				// gets the projected value as its text.
				out.Content = []mcp.Content{&mcp.TextContent{Text: string(o.Structured)}}
			}
		}
		if len(o.Dropped) > 0 {
			out.Meta[MetaDropped] = o.Dropped
		}
	}
	if out.Content == nil {
		out.Content = []mcp.Content{}
	}
	budget := policy.BudgetFor(review.Contract.GetResultBudgetBytes(), g.opts.ResultBudget, g.opts.PreviewBytes)
	if rawSize(out) <= budget.Bytes {
		// Only a result whose parts fit is encoded to measure it: a large
		// one is not copied once more just to learn it is large.
		size, err := encodedSize(out)
		if err != nil {
			return denial(policy.ReasonNotObject, "the result cannot be encoded", ""), outcomeRefused, policy.ReasonNotObject
		}
		if size <= budget.Bytes {
			return out, outcomeOK, ""
		}
	}
	return g.toArtifact(ctx, st, toolID, receiptID, budget, out)
}

// resultText is the text of r's text contents.
func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			if b.Len() >= maxLoggedErrorText {
				break
			}
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// rawSize is a lower bound of r's encoded size: the bytes of its texts,
// blobs and structured content.
func rawSize(r *mcp.CallToolResult) int {
	n := 0
	for _, c := range r.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			n += len(c.Text)
		case *mcp.ImageContent:
			n += len(c.Data)
		case *mcp.AudioContent:
			n += len(c.Data)
		}
	}
	if b, ok := r.StructuredContent.(json.RawMessage); ok {
		n += len(b)
	}
	return n
}

func encodedSize(r *mcp.CallToolResult) (int, error) {
	b, err := json.Marshal(r)
	return len(b), err
}

// toArtifact stores a result over the budget and answers with a bounded
// preview (head, tail, size, sha256) and a resource link.
func (g *Gateway) toArtifact(ctx context.Context, st *state, toolID, receiptID string, budget policy.Budget, r *mcp.CallToolResult) (*mcp.CallToolResult, string, string) {
	body, mime := artifactBody(r)
	if len(body) > g.opts.MaxArtifactBytes {
		return denial(ReasonResultTooLarge, fmt.Sprintf("the result has %d bytes, more than the %d an artifact may hold", len(body), g.opts.MaxArtifactBytes),
			"call the tool with arguments that select less"), outcomeRefused, ReasonResultTooLarge
	}
	a, err := g.opts.Artifacts.Put(ctx, artifact.Artifact{Tenant: st.p.Tenant, Subject: st.p.Subject, ToolID: toolID,
		ReceiptID: receiptID, MIMEType: mime, Body: body}, g.opts.Retention, g.opts.ArtifactQuota)
	var qe *artifact.QuotaError
	if errors.As(err, &qe) {
		detail := fmt.Sprintf("the result has %d bytes, over the %d-byte budget, and storing it would take your tenant's artifacts over their quota of %d artifacts", qe.Size, budget.Bytes, qe.Limit)
		if qe.Which == artifact.QuotaBytes {
			detail = fmt.Sprintf("the result has %d bytes, over the %d-byte budget, and storing it would take your tenant's artifacts over their quota of %d bytes", qe.Size, budget.Bytes, qe.Limit)
		}
		return denial(ReasonArtifactQuota, detail, "call the tool with arguments that select less, or wait until stored results expire"), outcomeRefused, ReasonArtifactQuota
	}
	if err != nil {
		return unavailable("the artifact store", err), outcomeUnavailable, ReasonUnavailable
	}
	g.opts.Metrics.Artifact(len(body))
	head, tail := preview(body, budget.PreviewBytes)
	text := fmt.Sprintf("The result is %d bytes (%s), over the %d-byte budget, and is stored as the resource %s (%s) until %s; read it with resources/read.\n--- head ---\n%s\n--- tail ---\n%s",
		a.Size, a.SHA256, budget.Bytes, a.URI(), mime, a.ExpiresAt.Format("2006-01-02T15:04:05Z07:00"), head, tail)
	size := a.Size
	return &mcp.CallToolResult{
		IsError: r.IsError,
		Content: []mcp.Content{
			&mcp.TextContent{Text: text},
			&mcp.ResourceLink{URI: a.URI(), Name: "result of " + toolID, MIMEType: mime, Size: &size},
		},
		Meta: mcp.Meta{MetaArtifact: map[string]any{"uri": a.URI(), "size": a.Size, "sha256": a.SHA256, "mime_type": mime},
			MetaDropped: r.Meta[MetaDropped]},
	}, outcomeOK, ""
}

// artifactBody is what is stored: the text when the result is text only,
// else the result's content and structured content as JSON.
func artifactBody(r *mcp.CallToolResult) ([]byte, string) {
	if r.StructuredContent == nil {
		var b strings.Builder
		textOnly := true
		for i, c := range r.Content {
			t, ok := c.(*mcp.TextContent)
			if !ok {
				textOnly = false
				break
			}
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(t.Text)
		}
		if textOnly {
			return []byte(b.String()), "text/plain"
		}
	}
	body, _ := json.Marshal(struct {
		Content           []mcp.Content `json:"content"`
		StructuredContent any           `json:"structuredContent,omitempty"`
	}{r.Content, r.StructuredContent})
	return body, "application/json"
}

// preview returns at most n bytes of body's head and of its tail, as valid
// UTF-8.
func preview(body []byte, n int) (string, string) {
	if len(body) <= 2*n {
		return strings.ToValidUTF8(string(body), "\uFFFD"), ""
	}
	return strings.ToValidUTF8(string(body[:n]), ""), strings.ToValidUTF8(string(body[len(body)-n:]), "")
}
