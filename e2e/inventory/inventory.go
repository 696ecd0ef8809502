package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/revision"
)

// inventory is the example's backend: stock levels, reservations and
// shipments in memory, and the tools over them.
type inventory struct {
	catalog *revision.Catalog

	mu           sync.Mutex
	onHand       map[string]int
	reservations map[string]reservation
	nextID       int
	descriptions map[string]string // tool name -> current description
	removed      map[string]bool
	// askDock: [Config.AskDock].
	askDock bool
}

type reservation struct {
	SKU      string
	Quantity int
	Expires  time.Time
}

func newInventory(c *revision.Catalog) *inventory {
	return &inventory{
		catalog:      c,
		onHand:       map[string]int{"SKU-100": 40, "SKU-200": 7, "SKU-300": 0},
		reservations: map[string]reservation{},
		descriptions: map[string]string{
			"inventory.lookup":  "Read the stock level of one SKU: units on hand and units reserved.",
			"inventory.reserve": "Hold units of one SKU for an order for 15 minutes. Fails if not enough units are free.",
			"inventory.release": "Release a reservation before it expires.",
			"shipment.status":   "Read the status of one shipment and when it last changed.",
		},
		removed: map[string]bool{},
	}
}

type lookupArgs struct {
	SKU string `json:"sku" jsonschema:"the stock keeping unit, e.g. SKU-100"`
}

type stockLevel struct {
	SKU      string `json:"sku"`
	OnHand   int    `json:"on_hand"`
	Reserved int    `json:"reserved"`
}

type reserveArgs struct {
	SKU      string `json:"sku" jsonschema:"the stock keeping unit"`
	Quantity int    `json:"quantity" jsonschema:"units to hold, at least 1"`
}

type reserved struct {
	ReservationID string    `json:"reservation_id"`
	ExpiresAt     time.Time `json:"expires_at"`
}

type releaseArgs struct {
	ReservationID string `json:"reservation_id" jsonschema:"from inventory.reserve"`
}

type released struct {
	Released bool `json:"released"`
}

type shipmentArgs struct {
	ShipmentID string `json:"shipment_id" jsonschema:"e.g. SHP-1"`
}

type shipment struct {
	ShipmentID string    `json:"shipment_id"`
	Status     string    `json:"status"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// addTool (re)adds one tool with its current description; the catalog's
// revision moves.
func (inv *inventory) addTool(name string) {
	inv.mu.Lock()
	desc := inv.descriptions[name]
	inv.mu.Unlock()
	t := &mcp.Tool{Name: name, Description: desc}
	switch name {
	case "inventory.lookup":
		t.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: true}
		revision.AddTool(inv.catalog, t, inv.lookup)
	case "inventory.reserve":
		revision.AddTool(inv.catalog, t, inv.reserve)
	case "inventory.release":
		revision.AddTool(inv.catalog, t, inv.release)
	case "shipment.status":
		t.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: true}
		revision.AddTool(inv.catalog, t, inv.shipment)
	}
}

func (inv *inventory) addTools() {
	for _, name := range inv.toolNames() {
		inv.addTool(name)
	}
}

func (inv *inventory) toolNames() []string {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	names := make([]string, 0, len(inv.descriptions))
	for n := range inv.descriptions {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (inv *inventory) reservedLocked(sku string) int {
	n := 0
	for _, r := range inv.reservations {
		if r.SKU == sku && time.Now().Before(r.Expires) {
			n += r.Quantity
		}
	}
	return n
}

func (inv *inventory) lookup(ctx context.Context, req *mcp.CallToolRequest, a lookupArgs) (*mcp.CallToolResult, stockLevel, error) {
	inv.mu.Lock()
	on, ok := inv.onHand[a.SKU]
	level := stockLevel{SKU: a.SKU, OnHand: on, Reserved: inv.reservedLocked(a.SKU)}
	inv.mu.Unlock()
	if !ok {
		return nil, stockLevel{}, fmt.Errorf("unknown SKU %q", a.SKU)
	}
	if !inv.askDock || req.Session == nil {
		return nil, level, nil
	}
	// [Config.AskDock]: the client, if it can be asked, names the dock.
	ip := req.Session.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return nil, level, nil
	}
	dock := "(declined)"
	res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: AskDockQuestion + " (" + a.SKU + ")",
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"dock": map[string]any{"type": "string"}}}})
	switch {
	case err != nil:
		dock = "(not asked: " + err.Error() + ")"
	case res.Action == "accept":
		dock, _ = res.Content["dock"].(string)
	}
	b, err := json.Marshal(level)
	if err != nil {
		return nil, stockLevel{}, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}, &mcp.TextContent{Text: "dock: " + dock}}}, level, nil
}

// AskDockQuestion is what inventory.lookup asks with [Config.AskDock].
const AskDockQuestion = "Which dock is the stock counted at?"

func (inv *inventory) reserve(_ context.Context, _ *mcp.CallToolRequest, a reserveArgs) (*mcp.CallToolResult, reserved, error) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	on, ok := inv.onHand[a.SKU]
	if !ok {
		return nil, reserved{}, fmt.Errorf("unknown SKU %q", a.SKU)
	}
	if a.Quantity < 1 || on-inv.reservedLocked(a.SKU) < a.Quantity {
		return nil, reserved{}, fmt.Errorf("cannot hold %d of %s", a.Quantity, a.SKU)
	}
	inv.nextID++
	id := fmt.Sprintf("RES-%d", inv.nextID)
	r := reservation{SKU: a.SKU, Quantity: a.Quantity, Expires: time.Now().Add(15 * time.Minute)}
	inv.reservations[id] = r
	return nil, reserved{ReservationID: id, ExpiresAt: r.Expires.UTC()}, nil
}

func (inv *inventory) release(_ context.Context, _ *mcp.CallToolRequest, a releaseArgs) (*mcp.CallToolResult, released, error) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	_, ok := inv.reservations[a.ReservationID]
	delete(inv.reservations, a.ReservationID)
	return nil, released{Released: ok}, nil
}

func (inv *inventory) shipment(_ context.Context, _ *mcp.CallToolRequest, a shipmentArgs) (*mcp.CallToolResult, shipment, error) {
	if !strings.HasPrefix(a.ShipmentID, "SHP-") {
		return nil, shipment{}, fmt.Errorf("unknown shipment %q", a.ShipmentID)
	}
	return nil, shipment{ShipmentID: a.ShipmentID, Status: "in_transit", UpdatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}, nil
}

// adminHandler serves the loopback admin API:
//
//	GET    /admin/tools                        current revision, tools and descriptions
//	PUT    /admin/tools/{name}/description     body: the new description (plain text)
//	DELETE /admin/tools/{name}                 remove the tool
//	POST   /admin/tools/{name}/restore         add a removed tool back
func (inv *inventory) adminHandler(log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/tools", func(w http.ResponseWriter, _ *http.Request) {
		inv.writeState(w)
	})
	mux.HandleFunc("PUT /admin/tools/{name}/description", inv.toolAction(log, "description changed", func(name string, r *http.Request) error {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		desc := strings.TrimSpace(string(body))
		if err != nil || desc == "" {
			return errors.New("the body must be the new description")
		}
		inv.mu.Lock()
		inv.descriptions[name] = desc
		gone := inv.removed[name]
		inv.mu.Unlock()
		if !gone {
			inv.addTool(name)
		}
		return nil
	}))
	mux.HandleFunc("DELETE /admin/tools/{name}", inv.toolAction(log, "tool removed", func(name string, _ *http.Request) error {
		inv.mu.Lock()
		inv.removed[name] = true
		inv.mu.Unlock()
		inv.catalog.RemoveTools(name)
		return nil
	}))
	mux.HandleFunc("POST /admin/tools/{name}/restore", inv.toolAction(log, "tool restored", func(name string, _ *http.Request) error {
		inv.mu.Lock()
		delete(inv.removed, name)
		inv.mu.Unlock()
		inv.addTool(name)
		return nil
	}))
	return mux
}

// toolAction returns a handler that runs act on the tool named in the path
// (404 for an unknown one, 400 when act fails), logs what happened and
// answers the new state.
func (inv *inventory) toolAction(log *slog.Logger, what string, act func(name string, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if !inv.known(name) {
			http.Error(w, "unknown tool", http.StatusNotFound)
			return
		}
		if err := act(name, r); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		log.Info(what, "tool", name, "revision", inv.catalog.Revision())
		inv.writeState(w)
	}
}

func (inv *inventory) known(name string) bool {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	_, ok := inv.descriptions[name]
	return ok
}

type toolState struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Listed      bool   `json:"listed"`
}

func (inv *inventory) writeState(w http.ResponseWriter) {
	inv.mu.Lock()
	var tools []toolState
	for name, desc := range inv.descriptions {
		tools = append(tools, toolState{Name: name, Description: desc, Listed: !inv.removed[name]})
	}
	inv.mu.Unlock()
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Revision string      `json:"revision"`
		Tools    []toolState `json:"tools"`
	}{inv.catalog.Revision(), tools})
}
