package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolcrib/toolcrib/platform/canonical"
	"github.com/toolcrib/toolcrib/revision"
)

// The checked form of the rules floor (see [rulesFloorStore]) adds to the
// queued form what the rules ask of a scan beyond its records and its job:
//
//   - I1: the policy epoch, the source identity and the trust configuration
//     a scan starts from are read at its start, and its commit activates
//     only if they are unchanged. The floor keeps the registry's rows (the
//     tenant's epoch, the server, the class's binding) in the same database
//     and reads them in the statement that starts the run, and checks them
//     inside the group's transaction, in its one round trip: no registry
//     service, no second read before the commit, no change log of the
//     registry's own. A first contact pins the identity observed (trust on
//     first use; I2 needs it to tell a changed identity) in that same
//     statement.
//   - §4: each tool is kept verbatim (raw) and its descriptor digest is the
//     sha256 of the RFC 8785 canonical form of the tool as sent, so the
//     floor reads each tools/list result's raw bytes below the go-sdk's
//     typed decoding (the go-sdk decodes an empty page instead, as
//     discovery's tap does) and decodes each page once itself; the input
//     schema's digest is kept beside it, and the snapshot records the
//     policy epoch, identity and trust configuration digests.
//   - §4's checks of a whole catalog before it commits: unique names, the
//     MCP name rules, the raw tool's size, the input (and output) schema a
//     JSON object within the size and depth limits, each `$schema` in the
//     allow-list (none means 2020-12; 2020-12 and draft-07), each `$ref` a
//     local fragment that resolves, icon `src` schemes https or data. No
//     validation of a schema against its dialect's metaschema, no flags.
//
// Still no retries, backoff, periodic refresh or cross-process wake.

// checkedTables is the checked form's schema: the registry's rows a scan
// reads, and the snapshot's and tools' columns §4 names beyond the earlier
// forms'.
func checkedTables(checked bool) string {
	if !checked {
		return ""
	}
	return `CREATE TABLE floor_tenants (tenant_id text PRIMARY KEY, policy_epoch bigint NOT NULL);
CREATE TABLE floor_servers (server_id text PRIMARY KEY, url text NOT NULL, trust_level text NOT NULL,
  revision_source text NOT NULL, identity_pin text NOT NULL DEFAULT '', version bigint NOT NULL DEFAULT 1);
CREATE TABLE floor_bindings (class text NOT NULL, server_id text NOT NULL REFERENCES floor_servers,
  tenant_id text NOT NULL REFERENCES floor_tenants, secret_ref text NOT NULL DEFAULT '', version bigint NOT NULL DEFAULT 1,
  PRIMARY KEY (class, server_id));
ALTER TABLE floor_snapshots ADD COLUMN policy_epoch bigint NOT NULL, ADD COLUMN identity_digest text NOT NULL,
  ADD COLUMN trust_config_digest text NOT NULL;
ALTER TABLE floor_tools ADD COLUMN input_schema_digest text NOT NULL, ADD COLUMN raw bytea NOT NULL;
`
}

// floorClass and floorTenant are the checked form's one audience class and
// its tenant.
const (
	floorClass  = "bench.readers"
	floorTenant = "bench"
)

// register writes the checked form's registry rows for the fleet (not
// timed): one tenant, each server unpinned, the class binding each.
func (s *rulesFloorStore) register(ctx context.Context, urls []string) error {
	ids := make([]string, len(urls))
	for i := range urls {
		ids[i] = floorServer(i)
	}
	_, err := s.pool.Exec(ctx, `WITH t AS (INSERT INTO floor_tenants VALUES ($3, 7)),
s AS (INSERT INTO floor_servers (server_id, url, trust_level, revision_source)
  SELECT id, url, 'TRUSTED', 'SERVER_PROVIDED' FROM unnest($1::text[], $2::text[]) AS u(id, url))
INSERT INTO floor_bindings (class, server_id, tenant_id) SELECT $4, id, $3 FROM unnest($1::text[]) AS u(id)`,
		ids, urls, floorTenant, floorClass)
	return err
}

// floorScan is what a checked scan read at its start: the tenant's policy
// epoch, the server's pin and version, the binding's version and what the
// trust configuration's digest is made of.
type floorScan struct {
	epoch          int64
	pin            string
	serverVersion  int64
	bindingVersion int64
	url            string
	level, source  string
	secretRef      string
}

// startChecked records a scan's run and reads, in the same statement and
// snapshot, what I1 says must be unchanged when it commits.
func (s *rulesFloorStore) startChecked(ctx context.Context, server string) (run, expected int64, fs floorScan, err error) {
	err = s.pool.QueryRow(ctx, `WITH r AS (INSERT INTO floor_runs (server_id, expected_generation)
  SELECT $1, coalesce((SELECT generation FROM floor_pointers WHERE server_id = $1), 0) RETURNING run_id, expected_generation)
SELECT r.run_id, r.expected_generation, t.policy_epoch, s.identity_pin, s.version, b.version, s.url, s.trust_level,
  s.revision_source, b.secret_ref
FROM r, floor_bindings b JOIN floor_servers s ON s.server_id = b.server_id JOIN floor_tenants t ON t.tenant_id = b.tenant_id
WHERE b.class = $2 AND b.server_id = $1`, server, floorClass).Scan(&run, &expected, &fs.epoch, &fs.pin, &fs.serverVersion,
		&fs.bindingVersion, &fs.url, &fs.level, &fs.source, &fs.secretRef)
	return run, expected, fs, err
}

// trustDigest is the digest of the trust configuration a scan runs under,
// with the identity it pins.
func (fs floorScan) trustDigest(server, pin string) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{server, fs.url, fs.level, fs.source, pin, floorClass, fs.secretRef}, "\x00")))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// checkedSnapshots queues, at the head of a group's round trip, the
// registry check of I1 (each server's version, its binding's version and
// its tenant's policy epoch what its scan read at its start, its pin empty
// or the identity the scan observed) with the first-use pins, then the
// snapshots with the policy epoch, identity and trust digests. A check
// that fails fails the group.
func (s *rulesFloorStore) checkedSnapshots(b *pgx.Batch, batch []*floorCommit, servers []string, counts []int32,
	revisions, roots []string, inserted func(pgconn.CommandTag) error) {
	n := len(batch)
	var (
		pins, trusts   = make([]string, n), make([]string, n)
		epochs, sv, bv = make([]int64, n), make([]int64, n), make([]int64, n)
	)
	for i, c := range batch {
		pins[i], trusts[i] = c.identity, c.trust
		epochs[i], sv[i], bv[i] = c.scan.epoch, c.scan.serverVersion, c.scan.bindingVersion
	}
	// The check fails in Postgres (a cast of its message to an integer),
	// so that the group's implicit transaction rolls back.
	b.Queue(`WITH u AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[]) AS u(id, pin, sv, bv, epoch)),
pinned AS (UPDATE floor_servers s SET identity_pin = u.pin, version = s.version + (s.identity_pin = '')::int
  FROM u, floor_bindings b, floor_tenants t
  WHERE s.server_id = u.id AND s.version = u.sv AND s.identity_pin IN ('', u.pin)
    AND b.class = $6 AND b.server_id = u.id AND b.version = u.bv AND t.tenant_id = b.tenant_id AND t.policy_epoch = u.epoch
  RETURNING 1)
SELECT CASE WHEN count(*) = $7 THEN 0
  ELSE ('checked floor: ' || count(*) || ' of ' || $7 || ' scans found the registry as they read it at their start')::int END
FROM pinned`, servers, pins, sv, bv, epochs, floorClass, n)
	b.Queue(`INSERT INTO floor_snapshots (server_id, generation, tool_count, source_revision, page_root, policy_epoch,
  identity_digest, trust_config_digest)
SELECT s, 1, c, r, p, e, i, d FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[])
  AS u(s, c, r, p, e, i, d)`, servers, counts, revisions, roots, epochs, pins, trusts).Exec(inserted)
}

// rawResults keeps the raw result of a session's tools/list responses and
// hands the go-sdk an empty page instead, so that a page is decoded once,
// by the floor, and every tool kept as sent. The floor lists one page at a
// time per session.
type rawResults struct {
	mcp.Transport
	mu     sync.Mutex
	id     any
	result json.RawMessage
}

func (r *rawResults) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := r.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &rawConn{Connection: c, r: r}, nil
}

// take returns the last tools/list result captured, once.
func (r *rawResults) take() json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.result
	r.result = nil
	return res
}

type rawConn struct {
	mcp.Connection
	r *rawResults
}

var emptyPage = json.RawMessage(`{"tools":[]}`)

func (c *rawConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "tools/list" && req.IsCall() {
		c.r.mu.Lock()
		c.r.id = req.ID.Raw()
		c.r.mu.Unlock()
	}
	return c.Connection.Write(ctx, msg)
}

func (c *rawConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	resp, ok := msg.(*jsonrpc.Response)
	if err != nil || !ok || resp.Error != nil {
		return msg, err
	}
	c.r.mu.Lock()
	mine := c.r.id != nil && resp.ID.Raw() == c.r.id
	if mine {
		c.r.id, c.r.result = nil, resp.Result
	}
	c.r.mu.Unlock()
	if mine {
		cp := *resp
		cp.Result = emptyPage
		msg = &cp
	}
	return msg, nil
}

// rawPage is one tools/list result as the checked form decodes it.
type rawPage struct {
	Tools      []json.RawMessage          `json:"tools"`
	NextCursor string                     `json:"nextCursor"`
	Meta       map[string]json.RawMessage `json:"_meta"`
}

// revision is the page's source catalog revision.
func (p *rawPage) revision() string {
	var v string
	_ = json.Unmarshal(p.Meta[revision.MetaKey], &v)
	return v
}

// floorTool is one tool of a page: its name, digests and raw JSON.
type floorTool struct {
	name, digest, input string
	raw                 json.RawMessage
}

// The checked form's limits: discovery's defaults.
const (
	floorMaxToolBytes   = 256 << 10
	floorMaxSchemaBytes = 64 << 10
	floorMaxSchemaDepth = 32
)

var (
	floorToolName  = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
	floorDialects  = map[string]bool{"https://json-schema.org/draft/2020-12/schema": true, "http://json-schema.org/draft-07/schema#": true, "http://json-schema.org/draft-07/schema": true}
	errFloorRefuse = errors.New("the checked floor refuses the tool")
)

// checkTool decodes and checks one raw tool (§4) and returns its digests;
// seen holds the catalog's names so far.
func checkTool(raw json.RawMessage, seen map[string]bool) (floorTool, error) {
	var t struct {
		Name         string          `json:"name"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
		Icons        []struct {
			Src string `json:"src"`
		} `json:"icons"`
	}
	if len(raw) > floorMaxToolBytes {
		return floorTool{}, fmt.Errorf("%w: %d bytes", errFloorRefuse, len(raw))
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return floorTool{}, fmt.Errorf("%w: %v", errFloorRefuse, err)
	}
	if !floorToolName.MatchString(t.Name) || seen[t.Name] {
		return floorTool{}, fmt.Errorf("%w: name %q invalid or repeated", errFloorRefuse, t.Name)
	}
	seen[t.Name] = true
	for _, ic := range t.Icons {
		if !strings.HasPrefix(ic.Src, "https:") && !strings.HasPrefix(ic.Src, "data:") {
			return floorTool{}, fmt.Errorf("%w: %s: icon scheme", errFloorRefuse, t.Name)
		}
	}
	input, err := checkSchema(t.InputSchema)
	if err != nil {
		return floorTool{}, fmt.Errorf("%w: %s: input schema: %v", errFloorRefuse, t.Name, err)
	}
	if len(t.OutputSchema) > 0 {
		if _, err := checkSchema(t.OutputSchema); err != nil {
			return floorTool{}, fmt.Errorf("%w: %s: output schema: %v", errFloorRefuse, t.Name, err)
		}
	}
	digest, err := canonical.Digest(raw)
	if err != nil {
		return floorTool{}, fmt.Errorf("%w: %s: %v", errFloorRefuse, t.Name, err)
	}
	return floorTool{name: t.Name, digest: digest, input: input, raw: raw}, nil
}

// checkSchema checks one schema (§4) and returns its digest.
func checkSchema(raw json.RawMessage) (string, error) {
	canon, err := canonical.Transform(raw)
	if err != nil {
		return "", err
	}
	if len(canon) > floorMaxSchemaBytes {
		return "", fmt.Errorf("%d canonical bytes", len(canon))
	}
	var root any
	if err := json.Unmarshal(canon, &root); err != nil {
		return "", err
	}
	if _, ok := root.(map[string]any); !ok {
		return "", errors.New("not a JSON object")
	}
	if err := walkSchema(root, root, 0); err != nil {
		return "", err
	}
	return canonical.DigestBytes(canon), nil
}

// walkSchema checks the depth, dialects and references under v.
func walkSchema(root, v any, depth int) error {
	if depth > floorMaxSchemaDepth {
		return errors.New("too deep")
	}
	switch v := v.(type) {
	case map[string]any:
		if d, ok := v["$schema"]; ok {
			if s, _ := d.(string); !floorDialects[s] {
				return fmt.Errorf("dialect %v", d)
			}
		}
		for _, k := range [...]string{"$ref", "$dynamicRef", "$recursiveRef"} {
			r, ok := v[k]
			if !ok {
				continue
			}
			s, _ := r.(string)
			if !strings.HasPrefix(s, "#") || (k == "$ref" && !resolves(root, s[1:])) {
				return fmt.Errorf("%s %v", k, r)
			}
		}
		for _, e := range v {
			if err := walkSchema(root, e, depth+1); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := walkSchema(root, e, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// resolves says a JSON pointer (the fragment of a local `$ref`) names a
// value under root.
func resolves(root any, pointer string) bool {
	if pointer == "" {
		return true
	}
	if !strings.HasPrefix(pointer, "/") {
		return false // an anchor: refused here (the fleet has none, so the floor would fail, not pass)
	}
	v := root
	for _, tok := range strings.Split(pointer[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = m[tok]; !ok {
			return false
		}
	}
	return true
}
