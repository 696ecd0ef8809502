package condition

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCompileRefusesWithPosition(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		line, col int
		msg       string
	}{
		{"syntax", "principal.subject ==", 1, 21, "Syntax error"},
		{"unknown variable", `user == "a"`, 1, 1, "undeclared reference to 'user'"},
		{"unknown field", `tool.name == "a"`, 1, 1, "undeclared reference to 'tool'"},
		{"second line", "true &&\n  nope", 2, 3, "undeclared reference to 'nope'"},
		{"not bool", `principal.subject`, 1, 1, ProblemNotBool},
		{"type mismatch", `principal.subject == 1`, 1, 19, "no matching overload"},
		{"cost", `args.a.all(i, args.b.all(j, args.c.all(k, i == j && j == k)))`, 1, 1, ProblemCost},
		{"too long", strings.Repeat(" ", MaxBytes) + "true", 0, 0, ProblemTooLong},
		{"not utf8", "\xff", 0, 0, ProblemNotUTF8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(tc.src)
			if err == nil {
				t.Fatal("compiled")
			}
			if err.Line != tc.line || err.Column != tc.col || !strings.Contains(err.Message, tc.msg) {
				t.Fatalf("got %d:%d %q, want %d:%d containing %q", err.Line, err.Column, err.Message, tc.line, tc.col, tc.msg)
			}
			if len(err.Message) > maxMessageBytes+len("…") {
				t.Fatalf("message not bounded: %d bytes", len(err.Message))
			}
		})
	}
}

func TestErrorMessageBounded(t *testing.T) {
	_, err := Compile(strings.Repeat("x", 3000) + " == 1")
	if err == nil || len(err.Message) > maxMessageBytes+len("…") {
		t.Fatalf("got %v", err)
	}
}

func num(s string) json.Number { return json.Number(s) }

// The four examples, evaluated.
func TestExamples(t *testing.T) {
	noon := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	night := time.Date(2026, 12, 2, 22, 0, 0, 0, time.UTC)
	base := func() Input {
		return Input{
			Principal: Principal{Subject: "alice", Tenant: "tenant-a", Groups: []string{"readers"}},
			Tool:      Tool{ID: "fs.read_text_file", Server: "fs", Effect: "READ_ONLY", Scopes: []string{"fs:read"}},
			Args:      map[string]any{},
			Request:   Request{Mode: "AUTONOMOUS", Time: noon},
		}
	}
	for _, tc := range []struct {
		name, src string
		edit      func(*Input)
		want      bool
		err       error
	}{
		{"path inside", PathExample, func(in *Input) { in.Args["path"] = "/data/tenant-a/x.txt" }, true, nil},
		{"path of another tenant", PathExample, func(in *Input) { in.Args["path"] = "/data/tenant-b/x.txt" }, false, nil},
		{"path escaping", PathExample, func(in *Input) { in.Args["path"] = "/data/tenant-a/../tenant-b/x" }, false, nil},
		// A `..` segment anywhere, the last one too, is refused: the path
		// must stay under /data/tenant-a/ after the file system resolves it.
		{"path ending in ..", PathExample, func(in *Input) { in.Args["path"] = "/data/tenant-a/.." }, false, nil},
		{"path ending in ../", PathExample, func(in *Input) { in.Args["path"] = "/data/tenant-a/../" }, false, nil},
		{"a name with dots", PathExample, func(in *Input) { in.Args["path"] = "/data/tenant-a/..notes/x..y" }, true, nil},
		{"path missing", PathExample, func(*Input) {}, false, ErrEval},
		{"amount 500", AmountExample, func(in *Input) { in.Args["amount"] = num("500") }, true, nil},
		{"amount 500.5", AmountExample, func(in *Input) { in.Args["amount"] = num("500.5") }, false, nil},
		{"amount 9000 finance lead", AmountExample, func(in *Input) {
			in.Args["amount"] = num("9000")
			in.Principal.Groups = append(in.Principal.Groups, "finance-leads")
		}, true, nil},
		{"run declared", RunExample, func(in *Input) { in.Request.RunID = "run-1" }, true, nil},
		{"run missing", RunExample, func(*Input) {}, false, nil},
		{"read-only at night", WindowExample, func(in *Input) { in.Request.Time = night }, true, nil},
		{"write at noon", WindowExample, func(in *Input) { in.Tool.Effect = "WRITE" }, true, nil},
		{"write at night", WindowExample, func(in *Input) { in.Tool.Effect = "WRITE"; in.Request.Time = night }, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, cerr := Compile(tc.src)
			if cerr != nil {
				t.Fatal(cerr)
			}
			in := base()
			tc.edit(&in)
			got, err := x.Eval(&in)
			if !errors.Is(err, tc.err) || got != tc.want {
				t.Fatalf("got %v, %v; want %v, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

// A comprehension over the arguments runs under EvalTimeout: a caller
// that bypassed the arguments caps with five million elements is
// interrupted and the answer is an error, never true; 4,096 elements (the
// cap on values) are decided in a few milliseconds.
func TestEvalTimeoutFailsClosed(t *testing.T) {
	x, cerr := Compile(`args.l.exists(a, a == "b")`)
	if cerr != nil {
		t.Fatal(cerr)
	}
	if !x.guarded {
		t.Fatal("a comprehension over the arguments is not guarded")
	}
	list := func(n int) []any {
		l := make([]any, n)
		for i := range l {
			l[i] = "a"
		}
		l[n-1] = "b"
		return l
	}
	start := time.Now()
	got, err := x.Eval(&Input{Args: map[string]any{"l": list(4096)}})
	if !got || err != nil {
		t.Fatalf("4,096 elements: %v, %v after %v", got, err, time.Since(start))
	}
	got, err = x.Eval(&Input{Args: map[string]any{"l": list(5_000_000)}})
	if got || !errors.Is(err, ErrEval) {
		t.Fatalf("five million elements: %v, %v", got, err)
	}
	if y, _ := Compile(AmountExample); y.guarded {
		t.Fatal("a condition without a comprehension needs no timer")
	}
}

func BenchmarkEvalAmount(b *testing.B) {
	x, _ := Compile(AmountExample)
	in := &Input{Principal: Principal{Groups: []string{"readers"}}, Args: map[string]any{"amount": num("120")}}
	for b.Loop() {
		if ok, err := x.Eval(in); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
