package intake

import (
	"errors"
	"testing"

	"github.com/toolcrib/toolcrib/platform/canonical"

	catalogv1 "github.com/toolcrib/toolcrib/gen/toolcrib/catalog/v1"
	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
)

func descriptor(name, raw string) *catalogv1.ToolDescriptor {
	d, _ := canonical.Digest([]byte(raw))
	return &catalogv1.ToolDescriptor{ToolId: "srv." + name, Name: name, DescriptorDigest: d, Raw: []byte(raw)}
}

// A snapshot that contradicts its pointer or itself is refused whole.
func TestPointerUpdateRefusesInconsistentSnapshots(t *testing.T) {
	pointer := &discoveryv1.ActivePointer{ServerId: "srv", AudienceClass: "t.readers", Generation: 3,
		State: discoveryv1.PointerState_POINTER_STATE_ACTIVE}
	good := func() *catalogv1.Snapshot {
		return &catalogv1.Snapshot{ServerId: "srv", AudienceClass: "t.readers", Generation: 3,
			Tools: []*catalogv1.ToolDescriptor{descriptor("a", `{"name":"a"}`), descriptor("b", `{"name":"b"}`)}}
	}
	up, err := pointerUpdate(pointer, 9, good())
	if err != nil || len(up.Tools) != 2 || up.Revision != 9 || up.Generation != 3 || up.Closed {
		t.Fatalf("good snapshot: %+v %v", up, err)
	}
	breakers := map[string]func(s *catalogv1.Snapshot){
		"other server":     func(s *catalogv1.Snapshot) { s.ServerId = "other" },
		"other class":      func(s *catalogv1.Snapshot) { s.AudienceClass = "t.writers" },
		"other generation": func(s *catalogv1.Snapshot) { s.Generation = 2 },
		"digest mismatch":  func(s *catalogv1.Snapshot) { s.Tools[0].Raw = []byte(`{"name":"a","x":1}`) },
		"bad json":         func(s *catalogv1.Snapshot) { s.Tools[0].Raw = []byte(`{`) },
		"duplicate name":   func(s *catalogv1.Snapshot) { s.Tools[1] = s.Tools[0] },
		"foreign tool id":  func(s *catalogv1.Snapshot) { s.Tools[0].ToolId = "other.a" },
		"bad name":         func(s *catalogv1.Snapshot) { s.Tools[0] = descriptor("a b", `{"name":"a b"}`) },
		"empty name":       func(s *catalogv1.Snapshot) { s.Tools[0].Name = "" },
	}
	for name, breakIt := range breakers {
		s := good()
		breakIt(s)
		var inconsistent *InconsistentError
		if _, err := pointerUpdate(pointer, 9, s); !errors.As(err, &inconsistent) {
			t.Errorf("%s: accepted (%v)", name, err)
		}
	}
	closed := &discoveryv1.ActivePointer{ServerId: "srv", AudienceClass: "t.readers", Generation: 3,
		State: discoveryv1.PointerState_POINTER_STATE_CLOSED}
	if up, err := pointerUpdate(closed, 10, nil); err != nil || !up.Closed {
		t.Fatalf("closed pointer: %+v %v", up, err)
	}
}
