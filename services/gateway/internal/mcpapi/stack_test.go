package mcpapi

import (
	"sync"
	"testing"
)

// descend uses about 270 bytes of stack per level, as a call's pipeline
// does going down through gRPC and JSON code.
//
//go:noinline
func descend(n int) int {
	var b [256]byte
	b[n%len(b)] = byte(n)
	if n == 0 {
		return int(b[0])
	}
	return descend(n-1) + int(b[n%len(b)])
}

// BenchmarkGrowStack is a request's goroutine going ~14 KB deep, as the
// SDK starts one per request: with its first small stack outgrown at
// depth (copied frame by frame, twice), and grown once by growStack at the
// top first.
func BenchmarkGrowStack(b *testing.B) {
	for _, grow := range []bool{false, true} {
		b.Run(map[bool]string{false: "outgrown", true: "grown"}[grow], func(b *testing.B) {
			var wg sync.WaitGroup
			for b.Loop() {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if grow {
						growStack()
					}
					descend(50)
				}()
				wg.Wait()
			}
		})
	}
}
