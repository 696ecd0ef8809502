package bench

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// floorConcurrency is how many servers the floor lists at once.
const floorConcurrency = 32

// floor is the least any crawler could take for the same fleet: a bare
// go-sdk client per server (connect, tools/list to the last page, close),
// 32 servers at a time, with no recording, validation or commit. It returns
// the wall time and the pages and tools read, so the caller can check that
// the floor read the whole fleet.
func floor(ctx context.Context, urls []string) (took time.Duration, pages, tools int, err error) {
	// One HTTP transport for the whole fleet, as discovery shares one.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: floorConcurrency}}
	defer hc.CloseIdleConnections()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	next := make(chan string)
	start := time.Now()
	for range floorConcurrency {
		wg.Go(func() {
			for u := range next {
				p, n, err := listAll(ctx, hc, u)
				mu.Lock()
				pages, tools = pages+p, tools+n
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	for _, u := range urls {
		next <- u
	}
	close(next)
	wg.Wait()
	took = time.Since(start)
	if len(errs) > 0 {
		return took, pages, tools, fmt.Errorf("floor: %d of %d servers failed, first: %w", len(errs), len(urls), errs[0])
	}
	return took, pages, tools, nil
}

// listAll lists one server's tools to the end.
func listAll(ctx context.Context, hc *http.Client, url string) (pages, tools int, err error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "toolcrib-bench-floor", Version: "v1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("connect %s: %w", url, err)
	}
	defer cs.Close()
	params := &mcp.ListToolsParams{}
	for {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return pages, tools, fmt.Errorf("tools/list %s page %d: %w", url, pages, err)
		}
		pages++
		tools += len(res.Tools)
		if res.NextCursor == "" {
			return pages, tools, nil
		}
		params.Cursor = res.NextCursor
	}
}
