package mcp

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/airlockhq/airlock"
)

// decodeArgs checks a tool call's arguments against the tool's input
// schema, fills in the schema's defaults and decodes them into in. What it
// refuses is an invalid error whose message is a sentence an agent can act
// on ("The argument format must be one of ..."), not a validator's path.
func decodeArgs(tool string, sch *jsonschema.Schema, res *jsonschema.Resolved, raw json.RawMessage, in any) error {
	args := map[string]any{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &args); err != nil {
			return invalid(airlock.ReasonArguments, "The arguments of %s must be a JSON object.", tool)
		}
	}
	if err := checkArgs(tool, sch, args); err != nil {
		return err
	}
	if err := res.ApplyDefaults(&args); err != nil {
		return invalid(airlock.ReasonArguments, "The arguments of %s could not take their defaults: %v.", tool, err)
	}
	// What checkArgs does not look at (nested objects) the validator does.
	if err := res.Validate(args); err != nil {
		return invalid(airlock.ReasonArguments, "The arguments do not match the input schema of %s: %v.", tool, err)
	}
	b, err := json.Marshal(args)
	if err == nil {
		err = json.Unmarshal(b, in)
	}
	if err != nil {
		return invalid(airlock.ReasonArguments, "The arguments of %s could not be read: %v.", tool, err)
	}
	return nil
}

// checkArgs checks the top level of args: known names, required ones,
// types, enumerations and bounds.
func checkArgs(tool string, sch *jsonschema.Schema, args map[string]any) error {
	names := make([]string, 0, len(args))
	for k := range args {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if _, ok := sch.Properties[k]; !ok && sch.AdditionalProperties != nil {
			return invalid(airlock.ReasonArguments, "%s has no argument %q; its arguments are %s.", tool, k, orList(propNames(sch), "and"))
		}
	}
	for _, r := range sch.Required {
		if _, ok := args[r]; !ok {
			return invalid(airlock.ReasonArguments, "The argument %s is required.", r)
		}
	}
	for _, k := range names {
		if p := sch.Properties[k]; p != nil {
			if err := checkValue("The argument "+k, k, p, args[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkValue(what, name string, p *jsonschema.Schema, v any) error {
	if want := p.Type; want != "" && !hasType(v, want) {
		return invalid(airlock.ReasonArguments, "%s must be %s, not %s.", what, article(want), describe(v))
	}
	if len(p.Enum) > 0 && !slices.ContainsFunc(p.Enum, func(e any) bool { return e == v }) {
		opts := make([]string, len(p.Enum))
		for i, e := range p.Enum {
			opts[i] = fmt.Sprint(e)
		}
		return invalid(airlock.ReasonArguments, "%s must be one of %s, not %s.", what, orList(opts, "or"), describe(v))
	}
	if n, ok := v.(float64); ok {
		if p.Minimum != nil && n < *p.Minimum {
			return invalid(airlock.ReasonArguments, "%s must be at least %s, not %s.", what, num(*p.Minimum), num(n))
		}
		if p.Maximum != nil && n > *p.Maximum {
			return invalid(airlock.ReasonLimit, "%s is %s, above the most this tool takes, %s.", what, num(n), num(*p.Maximum))
		}
	}
	if items, ok := v.([]any); ok && p.Items != nil {
		for i, it := range items {
			if err := checkValue(fmt.Sprintf("Item %d of %s", i+1, name), name, p.Items, it); err != nil {
				return err
			}
		}
	}
	return nil
}

func hasType(v any, t string) bool {
	switch t {
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		n, ok := v.(float64)
		return ok && n == math.Trunc(n) && !math.IsInf(n, 0)
	case "array":
		_, ok := v.([]any)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "null":
		return v == nil
	}
	return true
}

func article(t string) string {
	switch t {
	case "array":
		return "a list"
	case "integer":
		return "a whole number"
	case "object":
		return "an object"
	case "null":
		return "null"
	case "boolean":
		return "true or false"
	}
	return "a " + t
}

// describe names a JSON value for a message: the value itself when short.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		if len(x) > 40 {
			return "a string of " + strconv.Itoa(len(x)) + " bytes"
		}
		return strconv.Quote(x)
	case float64:
		return num(x)
	case bool:
		return strconv.FormatBool(x)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func propNames(s *jsonschema.Schema) []string {
	var out []string
	for k := range s.Properties {
		out = append(out, k)
	}
	// Schema order when known, else sorted.
	if len(s.PropertyOrder) == len(out) {
		return slices.Clone(s.PropertyOrder)
	}
	slices.Sort(out)
	return out
}

// orList joins a, b and c as "a, b and c" (or "or").
func orList(xs []string, conj string) string {
	switch len(xs) {
	case 0:
		return "none"
	case 1:
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " " + conj + " " + xs[len(xs)-1]
}
