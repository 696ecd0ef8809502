package crawl

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// outgoingRequest reads what jsonrpc.DecodeMessage reads from every request
// the go-sdk client writes (method, id, call or notification), and takes
// nothing else for a request.
func TestOutgoingRequestAgreesWithTheSDK(t *testing.T) {
	var bodies [][]byte
	for _, m := range []jsonrpc.Message{
		&jsonrpc.Request{ID: mustID(t, float64(7)), Method: methodToolsList, Params: []byte(`{"cursor":"c\"1"}`)},
		&jsonrpc.Request{ID: mustID(t, "s-9"), Method: methodToolsList},
		&jsonrpc.Request{ID: mustID(t, float64(1)), Method: "initialize", Params: []byte(`{"protocolVersion":"2025-11-25"}`)},
		&jsonrpc.Request{Method: "notifications/initialized"},
		&jsonrpc.Request{ID: mustID(t, float64(3)), Method: methodSubscriptionsListen},
		&jsonrpc.Response{ID: mustID(t, float64(7)), Result: []byte(`{"tools":[]}`)},
	} {
		b, err := jsonrpc.EncodeMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, b)
	}
	bodies = append(bodies, []byte(`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`), []byte(`{"jsonrpc":"2.0","id":{},"method":"x"}`),
		[]byte(`not json`), []byte(``))
	for _, b := range bodies {
		got, ok := outgoingRequest(b)
		msg, err := jsonrpc.DecodeMessage(b)
		want, isReq := msg.(*jsonrpc.Request)
		if err != nil || !isReq {
			if ok {
				t.Errorf("%s: read as request %+v; the SDK reads no request", b, got)
			}
			continue
		}
		if !ok || got.Method != want.Method || got.ID != want.ID || got.IsCall() != want.IsCall() {
			t.Errorf("%s: read %+v (%v), the SDK %+v", b, got, ok, want)
		}
	}
}

func mustID(t *testing.T, v any) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
