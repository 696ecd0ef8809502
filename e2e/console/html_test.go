package console

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// The console serves no script: its pages are what the server rendered,
// so the tests that need no browser read them with an HTML parser, as a
// browser's parser reads them (not with string matching on the markup).

// parsePage parses a page the console served.
func parsePage(t *testing.T, page string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatalf("the page does not parse: %v", err)
	}
	return doc
}

// attr is n's attribute name ("" when absent).
func attr(n *html.Node, name string) string {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

// attrOK is n's attribute name and whether n has it.
func attrOK(n *html.Node, name string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val, true
		}
	}
	return "", false
}

// hasClass reports whether n's class attribute lists class.
func hasClass(n *html.Node, class string) bool {
	for _, c := range strings.Fields(attr(n, "class")) {
		if c == class {
			return true
		}
	}
	return false
}

// all is every element under n (n included) for which match is true, in
// document order.
func all(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

// tag matches elements named name.
func tag(name string) func(*html.Node) bool {
	return func(n *html.Node) bool { return n.Data == name }
}

// byID is the element of id under n, or nil.
func byID(n *html.Node, id string) *html.Node {
	if l := all(n, func(n *html.Node) bool { return attr(n, "id") == id }); len(l) > 0 {
		return l[0]
	}
	return nil
}

// text is n's text content, spaces collapsed.
func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// rows are the texts of the cells (th and td) of each body row of table.
func rows(table *html.Node) [][]string {
	var out [][]string
	for _, tb := range all(table, tag("tbody")) {
		for _, tr := range all(tb, tag("tr")) {
			var cells []string
			for c := tr.FirstChild; c != nil; c = c.NextSibling {
				if c.Type == html.ElementNode && (c.Data == "td" || c.Data == "th") {
					cells = append(cells, text(c))
				}
			}
			out = append(out, cells)
		}
	}
	return out
}

// pageForm is one form of a page: where it posts and the fields it sends
// as served (the user fills the visible ones).
type pageForm struct {
	Method, Action string
	Fields         url.Values
}

// forms are the forms of a page.
func forms(doc *html.Node) []pageForm {
	var out []pageForm
	for _, f := range all(doc, tag("form")) {
		pf := pageForm{Method: strings.ToLower(attr(f, "method")), Action: attr(f, "action"), Fields: url.Values{}}
		if pf.Method == "" {
			pf.Method = "get"
		}
		for _, in := range all(f, func(n *html.Node) bool { return n.Data == "input" || n.Data == "textarea" || n.Data == "select" }) {
			name := attr(in, "name")
			if name == "" {
				continue
			}
			switch in.Data {
			case "textarea":
				pf.Fields.Add(name, text(in))
			case "select":
				// The selected option, else the first; an option's value
				// is its text without a value attribute.
				opts := all(in, tag("option"))
				if i := slices.IndexFunc(opts, func(o *html.Node) bool { _, ok := attrOK(o, "selected"); return ok }); i > 0 {
					opts = opts[i:]
				}
				if len(opts) > 0 {
					v, ok := attrOK(opts[0], "value")
					if !ok {
						v = text(opts[0])
					}
					pf.Fields.Add(name, v)
				}
			default:
				pf.Fields.Add(name, attr(in, "value"))
			}
		}
		out = append(out, pf)
	}
	return out
}
