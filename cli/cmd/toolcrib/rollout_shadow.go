package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	discoveryv1 "github.com/toolcrib/toolcrib/gen/toolcrib/discovery/v1"
)

// maxStaticFile bounds the size of a static tool list file.
const maxStaticFile = 8 << 20

// staticFile is a static tool list file (YAML, or JSON, which YAML reads):
//
//	server: inventory                 # optional when --server is given
//	audience_class: tenant-a.readers  # optional when --class is given
//	reason: the list in the prompt today
//	tools:
//	  - shipment_status               # a name: compared by presence
//	  - name: create_label
//	    descriptor_digest: sha256:…   # compared by descriptor digest
//	  - name: track
//	    input_schema: {type: object}  # compared by the schema's canonical digest
type staticFile struct {
	Server        string        `yaml:"server"`
	AudienceClass string        `yaml:"audience_class"`
	Reason        string        `yaml:"reason"`
	Tools         []staticEntry `yaml:"tools"`
}

type staticEntry struct {
	Name             string `yaml:"name"`
	DescriptorDigest string `yaml:"descriptor_digest"`
	InputSchema      any    `yaml:"input_schema"`
}

// UnmarshalYAML reads an entry as a bare name or as a mapping.
func (e *staticEntry) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return n.Decode(&e.Name)
	}
	// A node's Decode does not inherit the decoder's KnownFields.
	if n.Kind == yaml.MappingNode {
		for i := 0; i < len(n.Content); i += 2 {
			switch k := n.Content[i].Value; k {
			case "name", "descriptor_digest", "input_schema":
			default:
				return fmt.Errorf("line %d: field %s not found in a tool entry (name, descriptor_digest, input_schema)", n.Content[i].Line, safeText(k))
			}
		}
	}
	type plain staticEntry
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*e = staticEntry(p)
	return nil
}

// parseStaticFile decodes one document; unknown keys are refused.
func parseStaticFile(b []byte) (*staticFile, error) {
	if len(b) > maxStaticFile {
		return nil, fmt.Errorf("larger than %d bytes", maxStaticFile)
	}
	var f staticFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty file")
		}
		return nil, err
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one document")
	}
	return &f, nil
}

// toProto is the file's list as SetStaticToolList takes it.
func (f *staticFile) toProto() ([]*discoveryv1.StaticTool, error) {
	out := make([]*discoveryv1.StaticTool, len(f.Tools))
	for i, e := range f.Tools {
		t := &discoveryv1.StaticTool{Name: e.Name, DescriptorDigest: e.DescriptorDigest}
		if e.InputSchema != nil {
			b, err := json.Marshal(e.InputSchema)
			if err != nil {
				return nil, fmt.Errorf("tools[%d] (%s): input_schema: %w", i, safeText(e.Name), err)
			}
			t.InputSchema = b
		}
		out[i] = t
	}
	return out, nil
}

// pairFrom takes the pair from --server/--class or the two arguments.
func pairFrom(server, class string, a []string) (string, string, error) {
	switch {
	case len(a) == 2 && server == "" && class == "":
		return a[0], a[1], nil
	case len(a) == 0 && server != "" && class != "":
		return server, class, nil
	}
	return "", "", errors.New("give --server and --class (or <server-id> <audience-class>)")
}

func printStaticList(w io.Writer, l *discoveryv1.StaticToolList) {
	fmt.Fprintf(w, "server\t%s\n", l.GetServerId())
	fmt.Fprintf(w, "audience class\t%s\n", l.GetAudienceClass())
	fmt.Fprintf(w, "version\t%d\n", l.GetVersion())
	fmt.Fprintf(w, "set by\t%s at %s\n", l.GetSetBy(), when(l.GetSetAt()))
	fmt.Fprintf(w, "reason\t%s\n", orDash(safeText(l.GetReason())))
	fmt.Fprintf(w, "tools\t%d\n\n", len(l.GetTools()))
	fmt.Fprintln(w, "NAME\tCOMPARED BY\tDIGEST")
	for _, t := range l.GetTools() {
		by, d := "presence", "-"
		switch {
		case t.GetDescriptorDigest() != "":
			by, d = "descriptor digest", t.GetDescriptorDigest()
		case t.GetInputSchemaDigest() != "":
			by, d = "input schema", t.GetInputSchemaDigest()
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", t.GetName(), by, d)
	}
}

// printDiff writes one side of a comparison: a count line, then one line
// per tool (- missing, + extra, ~ changed).
func printDiff(w io.Writer, title string, d *discoveryv1.ToolDiff) {
	fmt.Fprintf(w, "%s: %d missing, %d extra, %d changed, %d same\n", title, d.GetMissingCount(), d.GetExtraCount(),
		d.GetChangedCount(), d.GetSameCount())
	for _, n := range d.GetMissing() {
		fmt.Fprintf(w, "  - %s\tmissing\n", n)
	}
	for _, n := range d.GetExtra() {
		fmt.Fprintf(w, "  + %s\textra\n", n)
	}
	for _, c := range d.GetChanged() {
		what := "descriptor"
		if c.GetCompared() == "input_schema_digest" {
			what = "input schema"
		}
		fmt.Fprintf(w, "  ~ %s\tchanged %s %s → %s\n", c.GetName(), what, shortDigest(c.GetExpectedDigest()), shortDigest(c.GetActualDigest()))
	}
	if d.GetTruncated() {
		fmt.Fprintf(w, "  (each list is cut at 1,000 names; the counts are exact)\n")
	}
}

func printComparison(w io.Writer, resp *discoveryv1.GetRunComparisonResponse) {
	c := resp.GetComparison()
	fmt.Fprintf(w, "server\t%s\n", c.GetServerId())
	fmt.Fprintf(w, "audience class\t%s\n", c.GetAudienceClass())
	fmt.Fprintf(w, "generation\t%d\n", c.GetGeneration())
	fmt.Fprintf(w, "run\t%s\n", c.GetRunId())
	fmt.Fprintf(w, "compared at\t%s\n", when(c.GetComparedAt()))
	switch cur := resp.GetCurrentStaticListVersion(); {
	case c.GetStaticListVersion() == 0 && cur == 0:
		fmt.Fprintf(w, "static list\tnone attached (toolcrib rollout static set)\n")
	case c.GetStaticListVersion() == 0:
		fmt.Fprintf(w, "static list\tnone attached then; version %d now: scan again to compare with it\n", cur)
	case cur != c.GetStaticListVersion():
		fmt.Fprintf(w, "static list\tversion %d; version %d now: scan again to compare with it\n", c.GetStaticListVersion(), cur)
	default:
		fmt.Fprintf(w, "static list\tversion %d (current)\n", c.GetStaticListVersion())
	}
	fmt.Fprintln(w)
	if c.GetAgainstStatic() != nil {
		printDiff(w, "against the static list (version "+strconv.FormatInt(c.GetStaticListVersion(), 10)+")", c.GetAgainstStatic())
	} else {
		fmt.Fprintln(w, "against the static list: no static list was attached")
	}
	if c.GetAgainstPrevious() != nil {
		printDiff(w, "against generation "+strconv.FormatInt(c.GetPreviousGeneration(), 10)+" (the previous one)", c.GetAgainstPrevious())
	} else {
		fmt.Fprintln(w, "against the previous generation: none (the pair's first generation)")
	}
}

// pairFlags are the flags naming a (server, audience class) pair, and a
// local --json.
func pairFlags(fs *pflag.FlagSet, server, class *string, jsonOut *bool) {
	fs.StringVar(server, "server", "", "server id")
	fs.StringVar(class, "class", "", "audience class")
	fs.BoolVar(jsonOut, "json", false, "print the result as JSON (as the global --json)")
}

// rolloutDiffCommand is `toolcrib rollout diff`.
func rolloutDiffCommand(e *env) *cobra.Command {
	var server, class string
	var run string
	var generation int64
	var jsonOut bool
	return withFlags(&cobra.Command{
		Use: "diff [<server-id> <audience-class>]",
		Short: "show a proven generation's missing, extra and changed tools against the static tool list and against the previous " +
			"generation, as stored with the run that proved it (the newest, or --generation, or --run)",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			req := &discoveryv1.GetRunComparisonRequest{RunId: run}
			var s, c string
			switch {
			case run != "" && generation != 0:
				return errors.New("give --run or --generation, not both")
			case run != "" && len(a) == 0 && server == "" && class == "":
			default:
				var err error
				if s, c, err = pairFrom(server, class, a); err != nil {
					return err
				}
				if run == "" {
					req.ServerId, req.AudienceClass, req.Generation = s, c, generation
				}
			}
			e.asJSON = e.asJSON || jsonOut
			resp, err := callDiscovery(ctx, e, func(ctx context.Context, cl discoveryv1.DiscoveryServiceClient) (*discoveryv1.GetRunComparisonResponse, error) {
				return cl.GetRunComparison(ctx, req)
			})
			if err != nil {
				return err
			}
			if got := resp.GetComparison(); s != "" && (got.GetServerId() != s || got.GetAudienceClass() != c) {
				return fmt.Errorf("run %s is a run of %s/%s, not %s/%s", run, got.GetServerId(), got.GetAudienceClass(), s, c)
			}
			return e.output(resp, func(w *tabwriter.Writer) { printComparison(w, resp) })
		},
	}, func(fs *pflag.FlagSet) {
		pairFlags(fs, &server, &class, &jsonOut)
		fs.StringVar(&run, "run", "", "the comparison of this run (a run id; the pair flags are then optional)")
		fs.Int64Var(&generation, "generation", 0, "the newest comparison of this generation; 0 for the newest of any")
	})
}

// rolloutStaticShowCommand is `toolcrib rollout static show`.
func rolloutStaticShowCommand(e *env) *cobra.Command {
	var server, class string
	var jsonOut bool
	return withFlags(&cobra.Command{
		Use:   "show [<server-id> <audience-class>]",
		Short: "show the static tool list attached to a server for an audience class",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			s, c, err := pairFrom(server, class, a)
			if err != nil {
				return err
			}
			e.asJSON = e.asJSON || jsonOut
			resp, err := callDiscovery(ctx, e, func(ctx context.Context, cl discoveryv1.DiscoveryServiceClient) (*discoveryv1.GetStaticToolListResponse, error) {
				return cl.GetStaticToolList(ctx, &discoveryv1.GetStaticToolListRequest{ServerId: s, AudienceClass: c})
			})
			if err != nil {
				return err
			}
			return e.output(resp, func(w *tabwriter.Writer) { printStaticList(w, resp.GetList()) })
		},
	}, func(fs *pflag.FlagSet) { pairFlags(fs, &server, &class, &jsonOut) })
}

// rolloutStaticSetCommand is `toolcrib rollout static set`.
func rolloutStaticSetCommand(e *env) *cobra.Command {
	var server, class, file, reason string
	var expected int64
	var jsonOut bool
	return withFlags(&cobra.Command{
		Use: "set [<server-id> <audience-class>]",
		Short: "attach the static tool list in use today to a server for an audience class (admin or the server's owner), " +
			"from a YAML or JSON file; it replaces the stored list whole",
		RunE: func(cmd *cobra.Command, a []string) error {
			ctx := cmd.Context()
			req, err := staticListRequest(file, server, class, reason, expected, a)
			if err != nil {
				return err
			}
			e.asJSON = e.asJSON || jsonOut
			resp, err := callDiscovery(ctx, e, func(ctx context.Context, cl discoveryv1.DiscoveryServiceClient) (*discoveryv1.SetStaticToolListResponse, error) {
				return cl.SetStaticToolList(ctx, req)
			})
			if err != nil {
				return err
			}
			return e.output(resp, func(w *tabwriter.Writer) { printStaticList(w, resp.GetList()) })
		},
	}, func(fs *pflag.FlagSet) {
		pairFlags(fs, &server, &class, &jsonOut)
		fs.StringVarP(&file, "file", "f", "", "the list file, YAML or JSON (required): server, audience_class, reason, tools "+
			"(each a name, or {name, descriptor_digest} or {name, input_schema})")
		fs.StringVar(&reason, "reason", "", "why (recorded); overrides the file's reason")
		fs.Int64Var(&expected, "version", 0, "the version you read, to replace only that one; 0 skips the check")
	})
}

// staticListRequest reads the list file of `rollout static set` and names
// its pair: the arguments, else --server and --class, else the file's; the
// file may not name another pair. --reason overrides the file's reason.
func staticListRequest(file, server, class, reason string, expected int64, a []string) (*discoveryv1.SetStaticToolListRequest, error) {
	if file == "" {
		return nil, errors.New("-f <file> is required")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	f, err := parseStaticFile(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	s, c := server, class
	if len(a) == 0 {
		if s == "" {
			s = f.Server
		}
		if c == "" {
			c = f.AudienceClass
		}
	}
	s, c, err = pairFrom(s, c, a)
	if err != nil {
		return nil, fmt.Errorf("%w, or server and audience_class in the file", err)
	}
	if (f.Server != "" && f.Server != s) || (f.AudienceClass != "" && f.AudienceClass != c) {
		return nil, fmt.Errorf("%s names %s/%s, not %s/%s", file, safeText(f.Server), safeText(f.AudienceClass), s, c)
	}
	tools, err := f.toProto()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	why := f.Reason
	if reason != "" {
		why = reason
	}
	return &discoveryv1.SetStaticToolListRequest{ServerId: s, AudienceClass: c, Tools: tools, ExpectedVersion: expected, Reason: why}, nil
}
