package discovery_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
	registryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/registry/v1"
	"github.com/toolcrib/toolcrib/services/discovery"
	"github.com/toolcrib/toolcrib/services/discovery/discoverytest"
)

// TriggerScan may queue a scan on a class read a moment ago, but never
// refuses on one: a server bound just now is scanned at once, and a scan
// queued on a read that is out of date (the server was unbound since) ends
// NOT_REGISTERED, because the scan reads the class again when it starts.
func TestTriggerUsesRecentClassReadsOnlyToQueue(t *testing.T) {
	e := start(t, func(c *discovery.Config) { c.MaxAttempts = 1 })
	cat := discoverytest.NewCatalog("r-1", 0, discoverytest.Tools("x", 2)...)
	srv := discoverytest.NewHTTP(t, cat, discoverytest.ServerOptions{}, false)
	e.register("inventory", srv.URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
	e.register("billing", srv.URL, registryv1.RevisionSource_REVISION_SOURCE_SERVER_PROVIDED, "")
	ctx := ctxT(t)

	// The class now covers both; a scan reads (and remembers) it.
	want(t, e.scanAndWait("inventory", class), eligible, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)

	// Unbind billing: the remembered read still lists it, so the trigger
	// queues, and the scan finds the binding gone.
	e.reg.PutClass(&registryv1.AudienceClass{Name: class, TenantId: tenant,
		Servers: []*registryv1.AudienceServer{{ServerId: "inventory", SecretRef: "env:" + envRef}}})
	r := e.wait(e.scan("billing", class).GetScanId(), discovery.Terminal)
	want(t, r, incomplete, discoveryv1.RunReason_RUN_REASON_NOT_REGISTERED)

	// That scan re-read the class without billing. Bind it again: the
	// remembered read would refuse, so the trigger reads afresh and queues.
	e.bind(class, "billing", "env:"+envRef)
	// (River records the end of the dropped scan a moment after its run's:
	// until then the trigger finds that scan still queued.)
	var resp *discoveryv1.TriggerScanResponse
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		resp, err = e.admin.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: "billing", AudienceClass: class})
		if err != nil || len(resp.GetScans()) != 1 {
			t.Fatalf("trigger right after the bind: %v %v", resp, err)
		}
		if !resp.GetScans()[0].GetAlreadyQueued() || time.Now().After(deadline) {
			break
		}
	}
	want(t, e.wait(resp.GetScans()[0].GetScanId(), discovery.Terminal), eligible, discoveryv1.RunReason_RUN_REASON_UNSPECIFIED)

	// Refusals: an unknown server, an unknown class, a class not covering.
	for _, tc := range []struct {
		req  *discoveryv1.TriggerScanRequest
		code codes.Code
	}{
		{&discoveryv1.TriggerScanRequest{ServerId: "nope", AudienceClass: class}, codes.NotFound},
		{&discoveryv1.TriggerScanRequest{ServerId: "inventory", AudienceClass: "tenant-a.nope"}, codes.NotFound},
	} {
		if _, err := e.admin.TriggerScan(ctx, tc.req); status.Code(err) != tc.code {
			t.Fatalf("%v: %v, want %v", tc.req, err, tc.code)
		}
	}
	e.reg.PutClass(&registryv1.AudienceClass{Name: "tenant-a.empty", TenantId: tenant})
	if _, err := e.admin.TriggerScan(ctx, &discoveryv1.TriggerScanRequest{ServerId: "inventory", AudienceClass: "tenant-a.empty"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("class not covering the server: %v", err)
	}
}
