package api

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

var update = flag.Bool("update", false, "rewrite docs/api.md from openapi.json")

// apiDocPath is the API reference rendered from openapi.json.
const apiDocPath = "../../docs/api.md"

// TestAPIReference: docs/api.md is what renderAPIDoc makes of openapi.json,
// and every link in it leads to a heading of the same file.
func TestAPIReference(t *testing.T) {
	t.Parallel()
	got, err := renderAPIDoc(openapiJSON, "../../errors.go")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkAnchors(got); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(apiDocPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(apiDocPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(apiDocPath)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("docs/api.md is out of date: run go test ./internal/api -run TestAPIReference -update")
	}
}

// TestRenderAPIDocDeterministic: two renderings are identical (no map
// order leaks into the file).
func TestRenderAPIDocDeterministic(t *testing.T) {
	t.Parallel()
	a, err := renderAPIDoc(openapiJSON, "../../errors.go")
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		b, err := renderAPIDoc(openapiJSON, "../../errors.go")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatal("two renderings of docs/api.md differ")
		}
	}
}

// TestRenderAPIDocRefusesBrokenRefs: a $ref to a schema that does not exist
// is an error, not a dead link.
func TestRenderAPIDocRefusesBrokenRefs(t *testing.T) {
	t.Parallel()
	doc := []byte(`{"openapi":"3.1.0","info":{"title":"T","version":"1"},"tags":[{"name":"x"}],
		"paths":{"/a":{"get":{"tags":["x"],"summary":"s","responses":{"200":{"description":"ok",
		"content":{"application/json":{"schema":{"$ref":"#/components/schemas/Missing"}}}}}}}},
		"components":{"schemas":{}}}`)
	_, err := renderAPIDoc(doc, "../../errors.go")
	if err == nil || !strings.Contains(err.Error(), "Missing") {
		t.Fatalf("err = %v, want one naming the missing schema", err)
	}
}

// TestCheckAnchors: a link to a heading that is not there is reported.
func TestCheckAnchors(t *testing.T) {
	t.Parallel()
	ok := []byte("# A b\n\n## POST /api/x/{id}\n\nSee [x](#post-apixid) and [a](#a-b).\n")
	if err := checkAnchors(ok); err != nil {
		t.Errorf("checkAnchors(ok) = %v", err)
	}
	bad := []byte("# A\n\nSee [x](#nowhere).\n")
	if err := checkAnchors(bad); err == nil {
		t.Error("checkAnchors(bad) = nil, want an error for #nowhere")
	}
}

// jnode is a JSON value that keeps the order of object keys, so that the
// reference follows the document's order.
type jnode struct {
	keyList []string
	obj     map[string]*jnode // nil unless an object
	items   []*jnode
	isArr   bool
	val     any // string, json.Number, bool or nil for scalars
}

func parseJNode(b []byte) (*jnode, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	n, err := decodeJNode(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after the document")
	}
	return n, nil
}

func decodeJNode(dec *json.Decoder) (*jnode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		n := &jnode{obj: map[string]*jnode{}}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			v, err := decodeJNode(dec)
			if err != nil {
				return nil, err
			}
			if _, dup := n.obj[k]; !dup {
				n.keyList = append(n.keyList, k)
			}
			n.obj[k] = v
		}
		_, err := dec.Token()
		return n, err
	case json.Delim('['):
		n := &jnode{isArr: true}
		for dec.More() {
			v, err := decodeJNode(dec)
			if err != nil {
				return nil, err
			}
			n.items = append(n.items, v)
		}
		_, err := dec.Token()
		return n, err
	}
	return &jnode{val: tok}, nil
}

// keys returns an object's keys in document order (none for nil).
func (n *jnode) keys() []string {
	if n == nil {
		return nil
	}
	return n.keyList
}

// arr returns an array's elements (none for nil).
func (n *jnode) arr() []*jnode {
	if n == nil {
		return nil
	}
	return n.items
}

// get follows keys through objects; nil when one is absent.
func (n *jnode) get(keys ...string) *jnode {
	for _, k := range keys {
		if n == nil || n.obj == nil {
			return nil
		}
		n = n.obj[k]
	}
	return n
}

// str returns the string at keys, or "".
func (n *jnode) str(keys ...string) string {
	if v := n.get(keys...); v != nil {
		if s, ok := v.val.(string); ok {
			return s
		}
	}
	return ""
}

// scalar renders a scalar as JSON (strings quoted).
func (n *jnode) scalar() string {
	switch v := n.val.(type) {
	case string:
		return strconv.Quote(v)
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	case nil:
		if n.obj != nil || n.isArr {
			return "…"
		}
		return "null"
	}
	return fmt.Sprint(n.val)
}

// apiDoc renders one OpenAPI document.
type apiDoc struct {
	root *jnode
	err  error // the first unresolvable $ref
}

const (
	schemaRefPrefix  = "#/components/schemas/"
	instanceParamRef = "#/components/parameters/Instance"
)

// resolve follows a $ref within the document (one hop).
func (d *apiDoc) resolve(n *jnode) *jnode {
	ref := n.str("$ref")
	if ref == "" {
		return n
	}
	path, ok := strings.CutPrefix(ref, "#/")
	var target *jnode
	if ok {
		target = d.root.get(strings.Split(path, "/")...)
	}
	if target == nil {
		if d.err == nil {
			d.err = fmt.Errorf("openapi.json: unresolvable $ref %q", ref)
		}
		return &jnode{obj: map[string]*jnode{}}
	}
	return target
}

// schemaLink links to a component schema's heading in the Schemas section.
func (d *apiDoc) schemaLink(ref string) string {
	name := strings.TrimPrefix(ref, schemaRefPrefix)
	if d.root.get("components", "schemas", name) == nil && d.err == nil {
		d.err = fmt.Errorf("openapi.json: $ref %q names no schema", ref)
	}
	return "[" + name + "](#" + slug(name) + ")"
}

// fixedValues lists the const and enum values a schema sets on its
// properties, as "`error.code` `invalid`".
func fixedValues(s *jnode, prefix string) []string {
	var out []string
	props := s.get("properties")
	if props == nil {
		return nil
	}
	for _, k := range props.keys() {
		p := props.get(k)
		name := prefix + k
		if c := p.get("const"); c != nil {
			out = append(out, "`"+name+"` `"+strings.Trim(c.scalar(), `"`)+"`")
		} else if e := p.get("enum"); e != nil {
			var vs []string
			for _, v := range e.arr() {
				vs = append(vs, "`"+strings.Trim(v.scalar(), `"`)+"`")
			}
			out = append(out, "`"+name+"` "+strings.Join(vs, " or "))
		}
		out = append(out, fixedValues(p, name+".")...)
	}
	return out
}

// typeOf renders a schema's type in a few words, linking named schemas.
func (d *apiDoc) typeOf(s *jnode) string {
	if s == nil {
		return "any"
	}
	if ref := s.str("$ref"); ref != "" {
		return d.schemaLink(ref)
	}
	for _, k := range []string{"oneOf", "anyOf"} {
		if alts := s.get(k); alts != nil {
			var parts []string
			for _, a := range alts.arr() {
				parts = append(parts, d.typeOf(a))
			}
			return "one of " + strings.Join(parts, ", ")
		}
	}
	if all := s.get("allOf"); all != nil {
		var parts, narrowed []string
		for _, a := range all.arr() {
			if a.str("$ref") == "" && a.get("type") == nil && a.get("properties") != nil {
				// A narrowing of another part: its fixed values.
				narrowed = append(narrowed, fixedValues(a, "")...)
				continue
			}
			parts = append(parts, d.typeOf(a))
		}
		out := strings.Join(parts, ", ")
		if len(parts) > 1 {
			out = "all of " + out
		}
		if len(narrowed) > 0 {
			out += " with " + strings.Join(narrowed, ", ")
		}
		return out
	}
	var types []string
	if t := s.get("type"); t != nil {
		if t.isArr {
			for _, x := range t.arr() {
				types = append(types, x.val.(string))
			}
		} else if str, ok := t.val.(string); ok {
			types = []string{str}
		}
	}
	if len(types) == 0 {
		return "any"
	}
	var out []string
	for _, t := range types {
		switch t {
		case "array":
			out = append(out, "array of "+d.typeOf(s.get("items")))
		case "object":
			if ap := s.get("additionalProperties"); ap != nil && ap.obj != nil {
				out = append(out, "map of string to "+d.typeOf(ap))
			} else {
				out = append(out, "object")
			}
		case "string":
			switch {
			case s.str("contentEncoding") != "":
				out = append(out, "string ("+s.str("contentEncoding")+")")
			case s.str("format") != "":
				out = append(out, "string ("+s.str("format")+")")
			default:
				out = append(out, "string")
			}
		default:
			out = append(out, t)
		}
	}
	return strings.Join(out, " or ")
}

// notes renders what a schema says beyond its type: its description,
// allowed values, bounds and default.
func (d *apiDoc) notes(s *jnode) string {
	var parts []string
	if desc := s.str("description"); desc != "" {
		// "0: 25" is the document's shorthand for the default a zero
		// value stands for.
		if rest, ok := strings.CutPrefix(desc, "0: "); ok {
			desc = "0 or absent means " + rest
		}
		parts = append(parts, sentence(desc))
	}
	if e := s.get("enum"); e != nil {
		var vals []string
		for _, v := range e.arr() {
			if v.val == "" {
				vals = append(vals, "`\"\"`")
				continue
			}
			vals = append(vals, "`"+strings.Trim(v.scalar(), `"`)+"`")
		}
		parts = append(parts, "One of "+strings.Join(vals, ", ")+".")
	}
	if c := s.get("const"); c != nil {
		parts = append(parts, "Always `"+strings.Trim(c.scalar(), `"`)+"`.")
	}
	lo, hi := s.get("minimum"), s.get("maximum")
	switch {
	case lo != nil && hi != nil:
		parts = append(parts, fmt.Sprintf("From %s to %s.", lo.scalar(), hi.scalar()))
	case lo != nil:
		parts = append(parts, fmt.Sprintf("At least %s.", lo.scalar()))
	case hi != nil:
		parts = append(parts, fmt.Sprintf("At most %s.", hi.scalar()))
	}
	if def := s.get("default"); def != nil {
		parts = append(parts, "Default `"+strings.Trim(def.scalar(), `"`)+"`.")
	}
	return strings.Join(parts, " ")
}

// field is one property of an object schema.
type field struct {
	name     string
	schema   *jnode
	required bool
}

// fields lists an object schema's properties in document order, merging
// the parts of an allOf (one level of $ref).
func (d *apiDoc) fields(s *jnode) []field {
	s = d.resolve(s)
	var out []field
	if all := s.get("allOf"); all != nil {
		for _, part := range all.arr() {
			out = append(out, d.fields(part)...)
		}
	}
	req := map[string]bool{}
	if r := s.get("required"); r != nil {
		for _, x := range r.arr() {
			req[x.val.(string)] = true
		}
	}
	if props := s.get("properties"); props != nil {
		for _, k := range props.keys() {
			out = append(out, field{name: k, schema: props.obj[k], required: req[k]})
		}
	}
	return out
}

func (d *apiDoc) fieldTable(b *strings.Builder, fs []field) {
	b.WriteString("| Field | Type | Required | Description |\n|---|---|---|---|\n")
	for _, f := range fs {
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", f.name, cell(d.typeOf(f.schema)), yesNo(f.required), cell(d.notes(f.schema)))
	}
}

// render writes the whole reference.
func (d *apiDoc) render(errorsGo string) ([]byte, error) {
	var b strings.Builder
	info := d.root.get("info")
	fmt.Fprintf(&b, "# %s\n\n", info.str("title"))
	b.WriteString("<!-- Generated from internal/api/openapi.json by TestAPIReference (internal/api/apidoc_test.go); do not edit.\n")
	b.WriteString("     Regenerate with: go test ./internal/api -run TestAPIReference -update -->\n\n")
	if s := info.str("summary"); s != "" {
		fmt.Fprintf(&b, "%s\n\n", sentence(s))
	}
	fmt.Fprintf(&b, "%s\n\n", info.str("description"))
	b.WriteString("`airlock serve` listens on `127.0.0.1:8080` by default; a running server serves this document as OpenAPI 3.1 at " +
		"[`GET /api/openapi.json`](#get-apiopenapijson).\n\n")

	b.WriteString("- [Authentication](#authentication)\n- [Errors](#errors)\n- [Routes](#routes)\n")
	for _, tag := range d.root.get("tags").arr() {
		fmt.Fprintf(&b, "  - [%s](#%s)\n", tag.str("name"), slug(tag.str("name")))
	}
	b.WriteString("- [Schemas](#schemas)\n\n")

	d.renderAuth(&b)
	if err := d.renderErrors(&b, errorsGo); err != nil {
		return nil, err
	}
	ops := d.operations()
	b.WriteString("## Routes\n\n| Method | Path | Summary |\n|---|---|---|\n")
	for _, tag := range d.root.get("tags").arr() {
		for _, op := range ops {
			if op.tag == tag.str("name") {
				fmt.Fprintf(&b, "| %s | [`%s`](#%s) | %s |\n", op.method, op.path, slug(op.method+" "+op.path), cell(op.op.str("summary")))
			}
		}
	}
	b.WriteString("\n")
	for _, tag := range d.root.get("tags").arr() {
		name := tag.str("name")
		fmt.Fprintf(&b, "## %s\n\n", name)
		if desc := tag.str("description"); desc != "" {
			fmt.Fprintf(&b, "%s\n\n", desc)
		}
		for _, op := range ops {
			if op.tag == name {
				d.renderOperation(&b, op)
			}
		}
	}
	for _, op := range ops {
		if !slices.ContainsFunc(d.root.get("tags").arr(), func(t *jnode) bool { return t.str("name") == op.tag }) {
			return nil, fmt.Errorf("openapi.json: %s %s has tag %q, which is not in tags", op.method, op.path, op.tag)
		}
	}
	d.renderSchemas(&b)
	if d.err != nil {
		return nil, d.err
	}
	return []byte(strings.TrimRight(b.String(), "\n") + "\n"), nil
}

func (d *apiDoc) renderAuth(b *strings.Builder) {
	b.WriteString("## Authentication\n\n")
	for _, name := range d.root.get("components", "securitySchemes").keys() {
		s := d.root.get("components", "securitySchemes", name)
		fmt.Fprintf(b, "Send `Authorization: Bearer <token>` with every call. %s\n\n", sentence(s.str("description")))
	}
	b.WriteString("Tenant tokens are made with `airlock token create --tenant NAME` (the data directory keeps their hash) or " +
		"`airlock token generate` (listed by hash in `tenants.NAME.tokens`); in development mode `airlock serve` prints one. " +
		"The admin token's hash goes in `admin_tokens`. See [configuration.md](configuration.md).\n\n")
	var open, optional []string
	for _, op := range d.operations() {
		sec := op.op.get("security")
		switch {
		case sec == nil:
		case len(sec.arr()) == 0:
			open = append(open, "`"+op.method+" "+op.path+"`")
		default:
			for _, alt := range sec.arr() {
				if len(alt.keys()) == 0 {
					optional = append(optional, "`"+op.method+" "+op.path+"`")
					break
				}
			}
		}
	}
	if len(open) > 0 {
		fmt.Fprintf(b, "No token is needed for %s.", strings.Join(open, ", "))
	}
	if len(optional) > 0 {
		fmt.Fprintf(b, " The token is optional for %s (see its description).", strings.Join(optional, ", "))
	}
	b.WriteString("\n\n")
	if p := d.root.get("components", "parameters", "Instance"); p != nil {
		fmt.Fprintf(b, "Optional header `%s`: %s Audit records and revocations tell instances apart; "+
			"without it the call is made for the tenant as a whole.\n\n", p.str("name"), lowerFirst(sentence(p.str("description"))))
	}
}

// codeComments reads the line comments of the Code constants in the root
// package's errors.go: the meaning of each code.
func codeComments(path string) (map[airlock.Code]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	out := map[airlock.Code]string{}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" || len(vs.Values) != 1 || vs.Comment == nil {
				continue
			}
			lit, ok := vs.Values[0].(*ast.BasicLit)
			if !ok {
				continue
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				return nil, err
			}
			out[airlock.Code(v)] = strings.TrimSpace(vs.Comment.Text())
		}
	}
	return out, nil
}

func (d *apiDoc) renderErrors(b *strings.Builder, errorsGo string) error {
	meaning, err := codeComments(errorsGo)
	if err != nil {
		return err
	}
	b.WriteString("## Errors\n\n")
	b.WriteString("Every error is a JSON [ErrorBody](#errorbody): `{\"error\": {\"code\", \"reason\", \"message\", \"decision_id\"}}`. " +
		"`code` is one of the ten below and sets the HTTP status; `reason` is finer (`private`, `loopback`, `metadata`, `capability`, " +
		"`token`, `body`, ...; every one is listed under [Reasons](#reasons)); `decision_id` names the audited decision (also in the `X-Airlock-Decision` header) and is empty when " +
		"the call was refused before any broker call; `hint`, present when there is advice, is the sentence the CLI prints after `hint:`.\n\n")
	b.WriteString("| Code | HTTP status | Meaning |\n|---|---|---|\n")
	for _, c := range airlock.Codes() {
		m, ok := meaning[c]
		if !ok {
			return fmt.Errorf("%s: code %q has no line comment to explain it", errorsGo, c)
		}
		s := statusFor(c)
		fmt.Fprintf(b, "| `%s` | %d %s | %s |\n", c, s, http.StatusText(s), cell(sentence(upperFirst(m))))
	}
	fmt.Fprintf(b, "\nA missing or unknown token is %d %s (code `denied`, reason `token`) with a `WWW-Authenticate: Bearer` header. "+
		"`rate_limited` carries `Retry-After` (seconds). A request body larger than `serve.max_body_bytes` is `too_large`; unknown "+
		"fields in a body are `invalid`.\n\n", http.StatusUnauthorized, http.StatusText(http.StatusUnauthorized))
	b.WriteString("A `message` is written for the caller: it never carries a resolved address, resolver answers, a DNS server " +
		"or a route's credential. A refusal of a name whose answers the policy refuses is `denied` with reason `internal_address` " +
		"(\"NAME resolves to an address the policy refuses\") whatever the class of the answer (loopback, private, link-local, " +
		"metadata, a deny-list range, a mix of public and internal answers), so that refusals cannot be used to map internal DNS; " +
		"a literal address the caller gave keeps its class (`private`, `loopback`, ...). The audit record of the decision " +
		"(`GET /api/audit`, the operator's log) keeps the address and the class. The same holds for MCP tool errors, a " +
		"WebAssembly guest's `last_error`, served-guest answers and event streams.\n\n")
	renderReasons(b)
	return nil
}

// renderReasons writes the reason catalogue (airlock.Reasons) as a table.
func renderReasons(b *strings.Builder) {
	b.WriteString("### Reasons\n\n")
	b.WriteString("Every reason Airlock emits, from the catalogue in `reasons.go`, with the codes it comes with. A reason without " +
		"codes is not an error's: it is the reason of a crawl's skipped URL, an audit record or a policy verdict. The CLI prints " +
		"the hint under the error; JSON errors carry none.\n\n")
	b.WriteString("| Reason | Codes | Meaning | CLI hint |\n|---|---|---|---|\n")
	for _, r := range airlock.Reasons() {
		codes := make([]string, len(r.Codes))
		for i, c := range r.Codes {
			codes[i] = "`" + string(c) + "`"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", reasonCell(r.Reason), strings.Join(codes, ", "), cell(r.Meaning), cell(r.Hint))
	}
	b.WriteString("\n")
}

// reasonCell is a reason as the Reasons table shows it.
func reasonCell(r airlock.Reason) string {
	if r == airlock.ReasonNone {
		return "(none)"
	}
	return "`" + string(r) + "`"
}

// operation is one method on one path.
type operation struct {
	method, path, tag string
	op, item          *jnode
}

var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// operations lists the document's operations in document order.
func (d *apiDoc) operations() []operation {
	var out []operation
	paths := d.root.get("paths")
	for _, p := range paths.keys() {
		item := paths.obj[p]
		for _, m := range item.keys() {
			if !slices.Contains(methods, m) {
				continue
			}
			op := item.obj[m]
			tag := ""
			if tags := op.get("tags"); tags != nil && len(tags.arr()) > 0 {
				tag = tags.arr()[0].val.(string)
			}
			out = append(out, operation{method: strings.ToUpper(m), path: p, tag: tag, op: op, item: item})
		}
	}
	return out
}

func (d *apiDoc) renderOperation(b *strings.Builder, o operation) {
	fmt.Fprintf(b, "### %s %s\n\n", o.method, o.path)
	if s := o.op.str("summary"); s != "" {
		fmt.Fprintf(b, "%s\n\n", sentence(s))
	}
	if s := o.op.str("description"); s != "" {
		fmt.Fprintf(b, "%s\n\n", s)
	}
	if sec := o.op.get("security"); sec != nil && len(sec.arr()) == 0 {
		b.WriteString("No token needed.\n\n")
	}

	// Parameters: the path item's and the operation's (which override by
	// name and place), path first, then query, then header.
	type param struct {
		n    *jnode
		ref  string
		rank int
	}
	var params []param
	seen := map[string]int{}
	rank := map[string]int{"path": 0, "query": 1, "header": 2, "cookie": 3}
	for _, src := range []*jnode{o.item.get("parameters"), o.op.get("parameters")} {
		if src == nil {
			continue
		}
		for _, raw := range src.arr() {
			p := d.resolve(raw)
			key := p.str("in") + " " + p.str("name")
			if i, ok := seen[key]; ok {
				params[i].n, params[i].ref = p, raw.str("$ref")
				continue
			}
			seen[key] = len(params)
			params = append(params, param{p, raw.str("$ref"), rank[p.str("in")]})
		}
	}
	slices.SortStableFunc(params, func(a, b param) int { return a.rank - b.rank })
	if len(params) > 0 {
		b.WriteString("**Parameters**\n\n| Name | In | Type | Required | Description |\n|---|---|---|---|---|\n")
		for _, p := range params {
			req := false
			if r := p.n.get("required"); r != nil {
				req, _ = r.val.(bool)
			}
			desc := sentence(p.n.str("description"))
			if p.ref == instanceParamRef { // explained once, under Authentication
				desc = "The instance of the tenant the call is made for: see [Authentication](#authentication)."
			}
			if n := d.notes(p.n.get("schema")); n != "" {
				desc = strings.TrimSpace(desc + " " + n)
			}
			fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s |\n", p.n.str("name"), p.n.str("in"), cell(d.typeOf(p.n.get("schema"))), yesNo(req), cell(desc))
		}
		b.WriteString("\n")
	}

	if rb := o.op.get("requestBody"); rb != nil {
		rb = d.resolve(rb)
		req := false
		if r := rb.get("required"); r != nil {
			req, _ = r.val.(bool)
		}
		content := rb.get("content")
		for _, mt := range content.keys() {
			s := content.obj[mt].get("schema")
			fmt.Fprintf(b, "**Request body** (`%s`, %s): %s", mt, map[bool]string{true: "required", false: "optional"}[req], d.typeOf(s))
			fs := d.fields(s)
			if len(fs) == 0 {
				if n := d.notes(d.resolve(s)); n != "" {
					fmt.Fprintf(b, ". %s", n)
				}
				b.WriteString("\n\n")
				continue
			}
			b.WriteString("\n\n")
			if desc := d.resolve(s).str("description"); desc != "" && s.str("$ref") != "" {
				fmt.Fprintf(b, "%s\n\n", sentence(desc))
			}
			d.fieldTable(b, fs)
			b.WriteString("\n")
		}
	}

	b.WriteString("**Responses**\n\n| Status | Meaning | Body |\n|---|---|---|\n")
	resps := o.op.get("responses")
	for _, code := range resps.keys() {
		raw := resps.obj[code]
		r := d.resolve(raw)
		status := code
		if n, err := strconv.Atoi(code); err == nil {
			status = fmt.Sprintf("%d %s", n, http.StatusText(n))
		} else if code == "default" {
			status = "other"
		}
		meaning := sentence(r.str("description"))
		shared := strings.HasPrefix(raw.str("$ref"), "#/components/responses/")
		if shared {
			// The same on every route: its first sentence, and the details
			// (headers included) once, under Errors.
			if i := strings.Index(meaning, ". "); i > 0 {
				meaning = meaning[:i+1]
			}
			meaning += " See [Errors](#errors)."
		} else if hs := r.get("headers"); hs != nil {
			var names []string
			for _, h := range hs.keys() {
				names = append(names, "`"+h+"`")
			}
			meaning += " Headers: " + strings.Join(names, ", ") + "."
		}
		var bodies []string
		if c := r.get("content"); c != nil {
			for _, mt := range c.keys() {
				s := c.obj[mt].get("schema")
				body := "`" + mt + "`: " + d.typeOf(s)
				if s != nil && s.str("$ref") == "" {
					if desc := s.str("description"); desc != "" {
						body += " (" + strings.TrimSuffix(lowerFirst(desc), ".") + ")"
					}
				}
				if line := c.obj[mt].get("x-line"); line != nil {
					body += "; each line " + d.typeOf(line)
				}
				if evs := c.obj[mt].get("x-events"); evs != nil {
					var parts []string
					for _, name := range evs.keys() {
						parts = append(parts, "`"+name+"` "+d.typeOf(evs.get(name)))
					}
					body += "; the data of each event: " + strings.Join(parts, ", ")
				}
				bodies = append(bodies, body)
			}
		}
		body := strings.Join(bodies, "<br>")
		if body == "" {
			body = "none"
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", status, cell(meaning), body)
	}
	b.WriteString("\n")
	d.renderHeaders(b, resps)
}

// renderHeaders explains the response headers of an operation once each.
func (d *apiDoc) renderHeaders(b *strings.Builder, resps *jnode) {
	var lines []string
	seen := map[string]bool{}
	for _, code := range resps.keys() {
		raw := resps.obj[code]
		hs := d.resolve(raw).get("headers")
		if hs == nil || strings.HasPrefix(raw.str("$ref"), "#/components/responses/") {
			continue
		}
		for _, name := range hs.keys() {
			h := d.resolve(hs.obj[name])
			desc := h.str("description")
			if seen[name] || desc == "" {
				continue
			}
			seen[name] = true
			lines = append(lines, fmt.Sprintf("- `%s`: %s", name, lowerFirst(sentence(desc))))
		}
	}
	if len(lines) > 0 {
		b.WriteString("Response headers:\n\n" + strings.Join(lines, "\n") + "\n\n")
	}
}

func (d *apiDoc) renderSchemas(b *strings.Builder) {
	b.WriteString("## Schemas\n\nThe JSON objects of request and response bodies. Fields not marked required may be absent or empty.\n\n")
	schemas := d.root.get("components", "schemas")
	for _, name := range schemas.keys() {
		s := schemas.obj[name]
		fmt.Fprintf(b, "### %s\n\n", name)
		if desc := s.str("description"); desc != "" {
			fmt.Fprintf(b, "%s\n\n", sentence(desc))
		}
		fs := d.fields(s)
		if len(fs) == 0 {
			// A scalar or union: its type says it all.
			fmt.Fprintf(b, "Type: %s.\n\n", d.typeOf(s))
			continue
		}
		d.fieldTable(b, fs)
		b.WriteString("\n")
	}
}

func renderAPIDoc(openapi []byte, errorsGo string) ([]byte, error) {
	root, err := parseJNode(openapi)
	if err != nil {
		return nil, fmt.Errorf("openapi.json: %v", err)
	}
	d := &apiDoc{root: root}
	return d.render(errorsGo)
}

// slug is GitHub's anchor for a heading: lower case, spaces to hyphens,
// punctuation other than '-' and '_' dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	headingRE = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	anchorRE  = regexp.MustCompile(`\]\(#([^)]*)\)`)
)

// checkAnchors reports links to anchors that no heading makes, and
// headings whose anchors collide.
func checkAnchors(md []byte) error {
	anchors := map[string]bool{}
	for _, m := range headingRE.FindAllSubmatch(md, -1) {
		a := slug(string(m[1]))
		if anchors[a] {
			return fmt.Errorf("two headings have the anchor #%s", a)
		}
		anchors[a] = true
	}
	for _, m := range anchorRE.FindAllSubmatch(md, -1) {
		if !anchors[string(m[1])] {
			return fmt.Errorf("link to #%s, which no heading makes", m[1])
		}
	}
	return nil
}

// cell makes s safe inside a Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// sentence ends s with a full stop unless it ends with punctuation.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.ContainsAny(s[len(s)-1:], ".!?:") {
		return s
	}
	return s + "."
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func lowerFirst(s string) string {
	if len(s) > 1 && s[1] >= 'A' && s[1] <= 'Z' { // an acronym: keep it
		return s
	}
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// TestReasonsDocumented: docs/api.md, as checked in, lists every reason of
// the catalogue under Reasons, with its codes and its CLI hint; a reason
// added to reasons.go without regenerating the reference fails here (and in
// TestAPIReference) until it is documented.
func TestReasonsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(apiDocPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := reasonsDocumented(string(doc), airlock.Reasons()); err != nil {
		t.Fatalf("%v: run go test ./internal/api -run TestAPIReference -update", err)
	}
}

// reasonsDocumented checks the Reasons table of doc against reasons.
func reasonsDocumented(doc string, reasons []airlock.ReasonInfo) error {
	_, table, ok := strings.Cut(doc, "\n### Reasons\n")
	if !ok {
		return fmt.Errorf("docs/api.md has no Reasons section")
	}
	rows := map[string]string{}
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, "## ") || strings.HasPrefix(line, "### ") {
			break
		}
		if cellText, rest, ok := strings.Cut(strings.TrimPrefix(line, "| "), " |"); ok && strings.HasPrefix(line, "| ") {
			rows[cellText] = rest
		}
	}
	for _, r := range reasons {
		row, ok := rows[reasonCell(r.Reason)]
		if !ok {
			return fmt.Errorf("reason %s is not documented under Reasons", reasonCell(r.Reason))
		}
		for _, c := range r.Codes {
			if !strings.Contains(row, "`"+string(c)+"`") {
				return fmt.Errorf("reason %s: code %s is not documented", reasonCell(r.Reason), c)
			}
		}
		if r.Hint != "" && !strings.Contains(row, cell(r.Hint)) {
			return fmt.Errorf("reason %s: its CLI hint is not documented", reasonCell(r.Reason))
		}
	}
	return nil
}

// TestReasonsDocumentedCatches: a reason missing from the table, or
// documented without one of its codes, is reported.
func TestReasonsDocumentedCatches(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	renderReasons(&b)
	doc := "# X\n\n" + b.String() + "## Next\n"
	reasons := airlock.Reasons()
	if err := reasonsDocumented(doc, reasons); err != nil {
		t.Fatalf("the rendered table: %v", err)
	}
	extra := append(reasons, airlock.ReasonInfo{Reason: "not_in_the_doc", Codes: []airlock.Code{airlock.CodeDenied}, Meaning: "x."})
	if err := reasonsDocumented(doc, extra); err == nil || !strings.Contains(err.Error(), "not_in_the_doc") {
		t.Errorf("a reason missing from the table: err = %v", err)
	}
	recoded := airlock.Reasons()
	recoded[1].Codes = append(recoded[1].Codes, airlock.CodeTooLarge)
	if err := reasonsDocumented(doc, recoded); err == nil || !strings.Contains(err.Error(), "too_large") {
		t.Errorf("a code missing from a row: err = %v", err)
	}
	if err := reasonsDocumented("# X\n", reasons); err == nil {
		t.Error("a document without a Reasons section passed")
	}
}
