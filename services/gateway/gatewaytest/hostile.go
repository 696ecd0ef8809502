// Package gatewaytest holds test support for the gateway and its users.
package gatewaytest

import "net/http"

// HostileMessages are server-to-client messages a hostile or careless
// upstream may send a gateway's upstream session on its standalone stream:
// every method the gateway relays and every notification it handles,
// without params, with null params and with params of the wrong shape, and
// messages that answer or ask nothing the client knows. None of them may
// stop the gateway or its session with the upstream (roots/list without
// params once crashed the gateway). The session pool's test sends them to
// the pool; e2e/gateway's through a real gateway to a real client.
var HostileMessages = []string{
	`{"jsonrpc":"2.0","id":"h1","method":"roots/list"}`,
	`{"jsonrpc":"2.0","id":"h2","method":"roots/list","params":null}`,
	`{"jsonrpc":"2.0","id":"h3","method":"roots/list","params":[]}`,
	`{"jsonrpc":"2.0","id":"h4","method":"elicitation/create"}`,
	`{"jsonrpc":"2.0","id":"h5","method":"elicitation/create","params":null}`,
	`{"jsonrpc":"2.0","id":"h6","method":"elicitation/create","params":"ask"}`,
	`{"jsonrpc":"2.0","id":"h7","method":"elicitation/create","params":{"_meta":"x"}}`,
	`{"jsonrpc":"2.0","id":"h8","method":"sampling/createMessage"}`,
	`{"jsonrpc":"2.0","id":"h9","method":"sampling/createMessage","params":{"_meta":{"dev.toolcrib/call":7}}}`,
	`{"jsonrpc":"2.0","method":"notifications/resources/updated"}`,
	`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":null}`,
	`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":5}}`,
	`{"jsonrpc":"2.0","method":"notifications/elicitation/complete"}`,
	`{"jsonrpc":"2.0","method":"notifications/progress"}`,
	`{"jsonrpc":"2.0","method":"notifications/progress","params":null}`,
	`{"jsonrpc":"2.0","method":"notifications/message"}`,
	`{"jsonrpc":"2.0","method":"notifications/message","params":null}`,
	`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":null}`,
	`{"jsonrpc":"2.0","id":"h10","method":"no/such/method"}`,
	`{"jsonrpc":"2.0","id":"h11","result":{}}`,
}

// Rewrite serves h with every write of its responses passed through
// rewrite first (an upstream that alters what a well-behaved server sends;
// the tests rewrite marked event-stream lines into hostile messages).
// Flushes reach the connection, so events still stream.
func Rewrite(h http.Handler, rewrite func([]byte) []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(rewriter{w, rewrite}, r)
	})
}

type rewriter struct {
	http.ResponseWriter
	rewrite func([]byte) []byte
}

func (w rewriter) Write(b []byte) (int, error) {
	if _, err := w.ResponseWriter.Write(w.rewrite(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (w rewriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
