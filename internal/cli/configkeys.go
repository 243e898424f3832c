package cli

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/airlockhq/airlock"
)

// The configuration's keys are checked against fileConfig's shape before
// koanf decodes them, so that a problem names where it is: the file and
// line of the key, or the environment variable. koanf's merged map has lost
// both, and mapstructure's reports read as strconv's text.

// configProblem is one mistake in the configuration, at where.
type configProblem struct {
	where string // "airlock.yaml:3" or "AIRLOCK_EGRESS__MAX_REDIRECTZ"
	msg   string
}

func (p configProblem) String() string { return p.where + ": " + p.msg }

var durationType = reflect.TypeFor[time.Duration]()

// configKeys maps each key of the struct type t (as the file spells it,
// lower case) to its field type; a squashed embedded struct's keys sit
// beside t's own.
func configKeys(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		key, opts, _ := strings.Cut(f.Tag.Get("koanf"), ",")
		if f.Anonymous && key == "" && opts == "squash" {
			for k, v := range configKeys(f.Type) {
				out[k] = v
			}
			continue
		}
		if !f.IsExported() || key == "" || key == "-" {
			continue
		}
		out[strings.ToLower(key)] = f.Type
	}
	return out
}

// unknownKey describes key (under the dotted parent) that t does not
// have, with the closest known key when one is close enough to be a typo.
func unknownKey(parent, key string, t reflect.Type) string {
	msg := "unknown key " + joinKey(parent, key)
	lower := strings.ToLower(key)
	if s := closest(lower, slices.Sorted(mapKeys(configKeys(t)))); s != "" {
		return msg + " (did you mean " + joinKey(parent, s) + "?)"
	}
	// A known key one section or more deeper: put at the wrong level.
	var deeper []string
	for _, p := range nestedKeys(t, "") {
		if p[strings.LastIndexByte(p, '.')+1:] == lower {
			deeper = append(deeper, joinKey(parent, p))
		}
	}
	if len(deeper) > 0 && len(deeper) <= 3 {
		msg += " (did you mean " + strings.Join(deeper, " or ") + "?)"
	}
	return msg
}

// nestedKeys lists the dotted keys below t's sections (structs only: a
// map's keys are names the file chooses), sorted.
func nestedKeys(t reflect.Type, prefix string) []string {
	var out []string
	for k, ft := range configKeys(t) {
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != durationType {
			out = append(out, nestedKeys(ft, joinKey(prefix, k))...)
			for sk := range configKeys(ft) {
				out = append(out, joinKey(joinKey(prefix, k), sk))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func mapKeys(m map[string]reflect.Type) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func joinKey(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// closest returns the candidate nearest to s by edit distance, or "" when
// none is near enough to be a typo of it (a quarter of its length, at
// least 2 edits).
func closest(s string, candidates []string) string {
	best, bestD := "", max(2, len(s)/4)+1
	for _, c := range candidates {
		if d := levenshtein(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// levenshtein is the edit distance between a and b in runes: insertions,
// deletions and substitutions.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// yamlLine matches the position in go-yaml's syntax errors.
var yamlLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): `) })

// checkYAML parses the configuration file b (named path) and returns every
// unknown key and mistyped value in it, each at its line. A syntax error
// is one problem, at its line when the parser says which.
func checkYAML(path string, b []byte) []configProblem {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		msg := err.Error()
		if m := yamlLine().FindStringSubmatch(msg); m != nil {
			return []configProblem{{where: path + ":" + m[1], msg: strings.TrimPrefix(msg, m[0])}}
		}
		return []configProblem{{where: path, msg: strings.TrimPrefix(msg, "yaml: ")}}
	}
	if len(doc.Content) == 0 {
		return nil // an empty file
	}
	w := &yamlWalk{path: path, seen: map[aliasUse]bool{}}
	w.walk("", doc.Content[0], reflect.TypeFor[fileConfig]())
	return w.out
}

// yamlWalk checks a parsed file against fileConfig's shape.
type yamlWalk struct {
	path string
	out  []configProblem
	// seen: an anchor is checked once per type, however many aliases
	// name it (a "billion laughs" file stays linear, a cycle ends).
	seen map[aliasUse]bool
}

type aliasUse struct {
	n *yaml.Node
	t reflect.Type
}

// walk checks the node n against the type t at the dotted key.
func (w *yamlWalk) walk(key string, n *yaml.Node, t reflect.Type) {
	path, out := w.path, &w.out
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil || w.seen[aliasUse{n.Alias, t}] {
			return
		}
		w.seen[aliasUse{n.Alias, t}] = true
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	at := func(n *yaml.Node) string { return path + ":" + strconv.Itoa(n.Line) }
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // an empty value leaves the key at its default
	}
	switch {
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			*out = append(*out, configProblem{at(n), fmt.Sprintf("%s must be a mapping of keys to values, not %s", orTop(key), describeNode(n))})
			return
		}
		var fields map[string]reflect.Type
		if t.Kind() == reflect.Struct {
			fields = configKeys(t)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Tag == "!!merge" { // <<: *anchor, or a list of them
				if v.Kind == yaml.SequenceNode {
					for _, e := range v.Content {
						w.walk(key, e, t)
					}
				} else {
					w.walk(key, v, t)
				}
				continue
			}
			if t.Kind() == reflect.Map {
				w.walk(joinKey(key, k.Value), v, t.Elem())
				continue
			}
			ft, ok := fields[strings.ToLower(k.Value)]
			if !ok {
				*out = append(*out, configProblem{at(k), unknownKey(key, k.Value, t)})
				continue
			}
			w.walk(joinKey(key, k.Value), v, ft)
		}
	case t.Kind() == reflect.Slice:
		switch n.Kind {
		case yaml.SequenceNode:
			for _, e := range n.Content {
				w.walk(key, e, t.Elem())
			}
		case yaml.ScalarNode: // one value is a list of one
			w.walk(key, n, t.Elem())
		default:
			*out = append(*out, configProblem{at(n), fmt.Sprintf("%s must be a list, not %s", key, describeNode(n))})
		}
	default:
		if n.Kind != yaml.ScalarNode {
			*out = append(*out, configProblem{at(n), fmt.Sprintf("%s must be %s, not %s", key, typeName(t), describeNode(n))})
			return
		}
		if !scalarFits(n.Value, n.Tag, t) {
			*out = append(*out, configProblem{at(n), fmt.Sprintf("%s must be %s, not %q", key, typeName(t), n.Value)})
		}
	}
}

func orTop(key string) string {
	if key == "" {
		return "the configuration"
	}
	return key
}

func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	default:
		return strconv.Quote(n.Value)
	}
}

// typeName is what a value of type t is, for a sentence.
func typeName(t reflect.Type) string {
	if t == durationType {
		return "a duration such as 20s or 1m30s"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct, reflect.Map:
		return "a mapping of keys to values"
	case reflect.Slice:
		return "a list"
	default:
		return "a string"
	}
}

// scalarFits reports whether the decoder (mapstructure, weakly typed, with
// the duration hook) turns the scalar s with YAML tag tag into a t.
func scalarFits(s, tag string, t reflect.Type) bool {
	if t == durationType {
		if tag == "!!int" {
			return true
		}
		_, err := time.ParseDuration(s)
		return err == nil
	}
	if s == "" && tag != "!!null" && t.Kind() != reflect.String {
		return tag == "" || tag == "!!str" // weakly decoded as the zero value
	}
	switch t.Kind() {
	case reflect.Bool:
		if tag == "!!bool" {
			return true
		}
		_, err := strconv.ParseBool(s)
		return err == nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if tag == "!!float" {
			f, err := strconv.ParseFloat(s, 64)
			return err == nil && f == float64(int64(f))
		}
		_, err := strconv.ParseInt(s, 0, t.Bits())
		return err == nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		_, err := strconv.ParseUint(s, 0, t.Bits())
		return err == nil
	case reflect.Float32, reflect.Float64:
		_, err := strconv.ParseFloat(s, t.Bits())
		return err == nil
	case reflect.String, reflect.Interface:
		return true
	default:
		return false
	}
}

// checkEnv checks the AIRLOCK_* variables in environ as checkYAML checks
// a file: each names a key path with "__" between levels.
func checkEnv(environ []string) []configProblem {
	var out []configProblem
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, envPrefix) || envSkip[name] {
			continue
		}
		if msg := checkEnvKey(strings.Split(strings.ToLower(strings.TrimPrefix(name, envPrefix)), "__"), val); msg != "" {
			out = append(out, configProblem{where: name, msg: msg})
		}
	}
	slices.SortFunc(out, func(a, b configProblem) int { return strings.Compare(a.where, b.where) })
	return out
}

func checkEnvKey(parts []string, val string) string {
	t := reflect.TypeFor[fileConfig]()
	key := ""
	for i, p := range parts {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			ft, ok := configKeys(t)[p]
			if !ok {
				return unknownKey(key, p, t)
			}
			t = ft
		case reflect.Map:
			t = t.Elem()
		default:
			return fmt.Sprintf("%s is %s and has no key %s", key, typeName(t), strings.Join(parts[i:], "."))
		}
		key = joinKey(key, p)
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return fmt.Sprintf("%s is a section: set its keys (%s%s__<KEY>)", key, envPrefix, strings.ToUpper(strings.Join(parts, "__")))
	case reflect.Slice:
		if val == "" {
			return ""
		}
		for _, e := range strings.Split(val, ",") {
			if e = strings.TrimSpace(e); !scalarFits(e, "", t.Elem()) {
				return fmt.Sprintf("%s must be a comma-separated list of %s, not %q", key, typeName(t.Elem()), e)
			}
		}
		return ""
	}
	if !scalarFits(val, "", t) {
		return fmt.Sprintf("%s must be %s, not %q", key, typeName(t), val)
	}
	return ""
}

// problemsError is the invalid error listing ps in one line.
func problemsError(ps []configProblem) error {
	s := make([]string, len(ps))
	unknown := false
	for i, p := range ps {
		s[i] = p.String()
		unknown = unknown || strings.HasPrefix(p.msg, "unknown key")
	}
	msg := "config: " + strings.Join(s, "; ")
	if unknown {
		msg += " (every key is in docs/configuration.md)"
	}
	return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "%s", msg)
}
