package mcpapi

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	admissionv1 "github.com/toolcrib/toolcrib/gen/toolcrib/admission/v1"
	"github.com/toolcrib/toolcrib/services/gateway/internal/bearer"
)

// FindToolsName is the name of the optional search tool (Options.FindTools):
// a host with a large visible set loads tools on demand instead of putting
// every schema in the prompt.
const FindToolsName = "find_tools"

// Limits of find_tools.
const (
	findDefault = 10
	findMax     = 50
	maxQuery    = 1024
)

var findTool = &mcp.Tool{
	Name: FindToolsName,
	Description: "Search the tools you may call by what they do (words of their names and descriptions, best match first). " +
		"Returns each match's name, description, input schema and effect class; call a match by its name.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","maxLength":1024,"description":"what the tool should do"},` +
		`"max_tools":{"type":"integer","minimum":1,"maximum":50,"description":"at most this many matches (default 10)"}},"required":["query"]}`),
	Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
}

type findIn struct {
	Query    string `json:"query"`
	MaxTools int    `json:"max_tools"`
}

type foundTool struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description"`
	InputSchema          json.RawMessage `json:"input_schema"`
	EffectClass          string          `json:"effect_class"`
	ConfirmationRequired bool            `json:"confirmation_required"`
}

// findTools answers find_tools with admission's visible-set search
// (ListVisibleTools with the query). Its matches are tools of the
// principal's visible set, callable by name.
func (g *Gateway) findTools(ctx context.Context, st *state, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	_, tok, ok := bearer.From(req.GetExtra().TokenInfo)
	if !ok {
		return denial(ReasonUnavailable, "no verified bearer token reached the gateway", ""), nil
	}
	var in findIn
	if len(req.Params.Arguments) > 0 {
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return denial("ARGUMENTS_INVALID", "find_tools takes {\"query\": string, \"max_tools\": integer}", ""), nil
		}
	}
	if in.Query == "" || len(in.Query) > maxQuery {
		return denial("ARGUMENTS_INVALID", "query must be 1 to 1024 bytes", ""), nil
	}
	if in.MaxTools <= 0 {
		in.MaxTools = findDefault
	}
	in.MaxTools = min(in.MaxTools, findMax)
	resp, err := g.opts.Admission.ListVisibleTools(ctx, &admissionv1.ListVisibleToolsRequest{Query: in.Query, MaxTools: int32(in.MaxTools), RunId: st.runID}, withToken(tok))
	if err != nil {
		return unavailable("admission", err), nil
	}
	out := struct {
		Tools []foundTool `json:"tools"`
	}{Tools: []foundTool{}}
	for _, vt := range resp.GetTools() {
		out.Tools = append(out.Tools, foundTool{Name: vt.GetModel().GetName(), Description: vt.GetModel().GetDescription(),
			InputSchema: objectSchema(vt.GetModel().GetInputSchema()), EffectClass: effectName(vt.GetRuntime().GetEffectClass()),
			ConfirmationRequired: vt.GetRuntime().GetConfirmationRequired()})
	}
	b, err := json.Marshal(out)
	if err != nil {
		return unavailable("the gateway", err), nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}, nil
}
