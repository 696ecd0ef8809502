package revision_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/revision"
)

type reserveArgs struct {
	SKU      string `json:"sku" jsonschema:"stock keeping unit"`
	Quantity int    `json:"quantity" jsonschema:"how many to hold"`
}

type reservation struct {
	ReservationID string `json:"reservation_id"`
}

func reserve(_ context.Context, _ *mcp.CallToolRequest, args reserveArgs) (*mcp.CallToolResult, reservation, error) {
	return nil, reservation{ReservationID: "res-" + args.SKU}, nil
}

// A server opts into proven catalogs by creating a Catalog and adding its
// tools through it. Every tools/list page then carries the revision, and a
// cursor from before a change is refused with -32602.
func ExampleNew() {
	ctx := context.Background()
	server := mcp.NewServer(&mcp.Implementation{Name: "inventory", Version: "1.0.0"}, nil)
	catalog, err := revision.New(server, revision.Options{
		Key:      []byte("load me from a secret store, 16+ bytes"),
		PageSize: 2,
		Epoch:    "example", // default: the start time, so revisions never repeat across restarts
	})
	if err != nil {
		log.Fatal(err)
	}
	revision.AddTool(catalog, &mcp.Tool{Name: "inventory.reserve", Description: "Hold stock for an order."}, reserve)
	revision.AddTool(catalog, &mcp.Tool{Name: "inventory.release", Description: "Release a hold."}, reserve)
	revision.AddTool(catalog, &mcp.Tool{Name: "inventory.lookup", Description: "Read stock levels."}, reserve)

	// A client lists the tools page by page.
	st, ct := mcp.NewInMemoryTransports()
	if _, err := server.Connect(ctx, st, nil); err != nil {
		log.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "crawler", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()
	first, err := cs.ListTools(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(first.Meta[revision.MetaKey], toolList(first))

	// The owner changes a description between the client's two pages.
	revision.AddTool(catalog, &mcp.Tool{Name: "inventory.lookup", Description: "Read and repair stock levels."}, reserve)
	_, err = cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: first.NextCursor})
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		fmt.Println("stale cursor:", rpcErr.Code)
	}

	// Listing again from the start shows the new revision on every page.
	for cursor := ""; ; {
		page, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(page.Meta[revision.MetaKey], toolList(page))
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	// Output:
	// example.4 [inventory.lookup inventory.release]
	// stale cursor: -32602
	// example.5 [inventory.lookup inventory.release]
	// example.5 [inventory.reserve]
}

func toolList(res *mcp.ListToolsResult) []string {
	var names []string
	for _, t := range res.Tools {
		names = append(names, t.Name)
	}
	return names
}
