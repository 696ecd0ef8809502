package mcpapi

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Values of a result's resultType (MCP 2026-07-28, SEP-2322).
const (
	resultTypeComplete      = "complete"
	resultTypeInputRequired = "input_required"
)

// typedResult is the answer to tools/call, resources/read or prompts/get
// as the client's protocol version wants it on the wire: at 2026-07-28 and
// later it carries resultType ("input_required" when it asks for input,
// else "complete") also when the gateway answered the request itself (the
// SDK sets it only on the results of its own handlers); older versions
// never get the field (an upstream's result relayed as is may carry it).
type typedResult struct {
	mcp.Result
	resultType string // "" drops the field
}

// needsInput reports whether r asks the client for input.
type needsInput interface{ NeedsInput() bool }

// withResultType wraps a tools/call, resources/read or prompts/get result
// for the protocol version of ss ([supportsInputRequests]).
func withResultType(ss *mcp.ServerSession, res mcp.Result) mcp.Result {
	if res == nil {
		return nil
	}
	if _, ok := res.(typedResult); ok {
		return res
	}
	if !supportsInputRequests(ss) {
		return typedResult{Result: res}
	}
	rt := resultTypeComplete
	if n, ok := res.(needsInput); ok && n.NeedsInput() {
		rt = resultTypeInputRequired
	}
	if r, ok := res.(*mcp.CallToolResult); ok && r.InputRequests != nil {
		rt = resultTypeInputRequired
	}
	if r, ok := res.(*mcp.ReadResourceResult); ok && r.InputRequests != nil {
		rt = resultTypeInputRequired
	}
	if r, ok := res.(*mcp.GetPromptResult); ok && r.InputRequests != nil {
		rt = resultTypeInputRequired
	}
	return typedResult{Result: res, resultType: rt}
}

// MarshalJSON is the wrapped result's JSON object with resultType set (or
// removed).
func (t typedResult) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(t.Result)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	if t.resultType == "" {
		if _, ok := fields["resultType"]; !ok {
			return b, nil
		}
		delete(fields, "resultType")
	} else {
		fields["resultType"], _ = json.Marshal(t.resultType)
	}
	return json.Marshal(fields)
}
