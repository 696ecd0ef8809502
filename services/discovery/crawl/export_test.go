package crawl

import "github.com/modelcontextprotocol/go-sdk/jsonrpc"

type jsonrpcRequest = jsonrpc.Request

func decodeRequest(b []byte) (*jsonrpc.Request, error) {
	m, err := jsonrpc.DecodeMessage(b)
	if err != nil {
		return nil, err
	}
	return m.(*jsonrpc.Request), nil
}
