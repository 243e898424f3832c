package contracttest

import (
	"reflect"
	"sort"
	"strings"
)

// JSONFields lists the JSON names of a struct type's fields as
// encoding/json reads them, embedded structs flattened, sorted: what a
// closed schema of the type must define.
func JSONFields(t reflect.Type) []string {
	var out []string
	for _, f := range Fields(t) {
		out = append(out, f.Name)
	}
	sort.Strings(out)
	return out
}

// Field is what encoding/json makes of a struct field.
type Field struct {
	Name     string
	Omit     bool // omitempty or omitzero: absent when empty
	Nullable bool // written, and null when nil (a pointer, slice, map or interface)
}

// Fields lists a struct type's fields as encoding/json writes them, in
// order, embedded structs flattened.
func Fields(t reflect.Type) []Field {
	var out []Field
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, Fields(f.Type)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omit := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
		switch f.Type.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
			out = append(out, Field{name, omit, !omit})
		default:
			out = append(out, Field{name, omit, false})
		}
	}
	return out
}
