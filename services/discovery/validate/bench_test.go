package validate_test

import (
	"fmt"
	"testing"

	"github.com/toolcrib/toolcrib/services/discovery/crawl"
	"github.com/toolcrib/toolcrib/services/discovery/validate"
)

// BenchmarkCatalog validates 10,000 distinct typical tools.
func BenchmarkCatalog(b *testing.B) {
	tools := make([]crawl.Tool, 10_000)
	for i := range tools {
		tools[i] = tool(b, fmt.Sprintf(`{"name":"tool_%d","description":"Reserves stock item %d for an order.","inputSchema":{"type":"object","properties":{"sku_%d":{"type":"string","description":"the sku"},"qty":{"type":"integer","minimum":1},"opts":{"type":"object","properties":{"fast":{"type":"boolean"}}}},"required":["sku_%d"]},"annotations":{"readOnlyHint":false}}`, i, i, i, i))
	}
	for b.Loop() {
		if rep := validate.Catalog(tools, validate.Limits{}); rep.Refusal != nil {
			b.Fatal(rep.Refusal)
		}
	}
}
