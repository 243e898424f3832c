package cli

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/wasmhost"
)

// Configuration sources, lowest precedence first: the embedded defaults,
// the YAML file (--config, else $AIRLOCK_CONFIG, else ./airlock.yaml when it
// exists), AIRLOCK_* environment variables, then flags.
//
// Environment variables name a key path with "__" between levels:
// AIRLOCK_DATA_DIR=/var/lib/airlock, AIRLOCK_EGRESS__DNS_SERVER=10.0.0.2:53,
// AIRLOCK_LIMITS__TENANT_RATE=500. List values are comma-separated.
const (
	envPrefix         = "AIRLOCK_"
	defaultConfigFile = "airlock.yaml"
	keyDelim          = "::" // host names and tenant names carry dots, so keys nest on "::"
)

// envSkip are AIRLOCK_ variables that are not configuration keys.
var envSkip = map[string]bool{"AIRLOCK_CONFIG": true, "AIRLOCK_TOKEN": true}

// fileConfig is the configuration's shape: the engine's Config, with the
// serve section beside its keys (which only `airlock serve` reads).
type fileConfig struct {
	engine.Config `koanf:",squash"`
	Serve         ServeConfig `koanf:"serve" json:"serve"`
	Proxy         ProxyConfig `koanf:"proxy" json:"proxy"`
}

// Defaults of `airlock serve`.
const (
	defaultListen       = "127.0.0.1:8080"
	defaultMaxBodyBytes = 1 << 20
)

// ServeConfig is the HTTP server of `airlock serve`: the HTTP API, MCP over
// streamable HTTP at /mcp, and the metrics.
type ServeConfig struct {
	// Listen is host:port with an IP literal host ("127.0.0.1:8080").
	Listen string `koanf:"listen" json:"listen"`
	// PublicMetrics serves GET /metrics without a token on a non-loopback
	// listener (on loopback it is always served without one).
	PublicMetrics bool `koanf:"public_metrics" json:"public_metrics"`
	// MaxBodyBytes limits request bodies (413 too_large above it).
	MaxBodyBytes int64 `koanf:"max_body_bytes" json:"max_body_bytes"`
	// DrainTimeout bounds the graceful shutdown: in-flight calls get this
	// long to finish after SIGINT/SIGTERM [engine.DefaultDrainTimeout].
	DrainTimeout time.Duration `koanf:"drain_timeout" json:"drain_timeout"`
}

// withDefaults is s as `airlock serve` runs it.
func (s ServeConfig) withDefaults() ServeConfig {
	if s.Listen == "" {
		s.Listen = defaultListen
	}
	if s.MaxBodyBytes <= 0 {
		s.MaxBodyBytes = defaultMaxBodyBytes
	}
	if s.DrainTimeout <= 0 {
		s.DrainTimeout = engine.DefaultDrainTimeout
	}
	return s
}

// effectiveGuests is g as the WebAssembly host fills it on this machine
// (wasmhost.DefaultBudget; InstancesPerPrincipal at most Instances).
// ClientInstances depends on the served guest's profile and stays as set.
func effectiveGuests(g engine.GuestsConfig) engine.GuestsConfig {
	d := wasmhost.DefaultBudget()
	if g.Instances == 0 {
		g.Instances = d.Instances
	}
	if g.InstancesPerPrincipal == 0 || g.InstancesPerPrincipal > g.Instances {
		g.InstancesPerPrincipal = g.Instances
	}
	if g.MemoryMiB == 0 {
		g.MemoryMiB = int(d.Memory >> 20)
	}
	return g
}

// effectiveConfig is cfg with every default filled in: the engine's keys
// as engine.Effective says New runs them, serve's as serve runs them.
func effectiveConfig(cfg fileConfig) fileConfig {
	out := fileConfig{Config: engine.Effective(cfg.Config), Serve: cfg.Serve.withDefaults(), Proxy: cfg.Proxy.withDefaults()}
	out.Guests = effectiveGuests(out.Guests)
	return out
}

// loadConfig reads the configuration. path "" means $AIRLOCK_CONFIG, else
// ./airlock.yaml if present, else none. It returns the path actually read.
func loadConfig(path string, environ []string) (fileConfig, string, error) {
	var cfg fileConfig
	var problems []configProblem
	k := koanf.New(keyDelim)
	if path == "" {
		path = lookupEnv(environ, "AIRLOCK_CONFIG")
	}
	if path == "" {
		if _, err := os.Stat(defaultConfigFile); err == nil {
			path = defaultConfigFile
		}
	}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return cfg, path, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "config: read %s: %v", path, errors.Unwrap(err))
		}
		// Problems name their line here, which koanf's map has lost.
		if problems = checkYAML(path, b); len(problems) > 0 {
			problems = append(problems, checkEnv(environ)...)
			return cfg, path, problemsError(problems)
		}
		if err := k.Load(rawbytes.Provider(b), yaml.Parser()); err != nil {
			return cfg, path, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "config: %s: %v", path, err)
		}
	}
	if problems = checkEnv(environ); len(problems) > 0 {
		return cfg, path, problemsError(problems)
	}
	envMap := map[string]any{}
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, envPrefix) || envSkip[name] {
			continue
		}
		key := strings.ToLower(strings.TrimPrefix(name, envPrefix))
		key = strings.ReplaceAll(key, "__", keyDelim)
		envMap[key] = val
	}
	if len(envMap) > 0 {
		if err := k.Load(confmap.Provider(envMap, keyDelim), nil); err != nil {
			return cfg, path, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "config: environment: %v", err)
		}
	}
	err := k.UnmarshalWithConf("", &cfg, koanf.UnmarshalConf{
		Tag: "koanf",
		DecoderConfig: &mapstructure.DecoderConfig{
			TagName:          "koanf",
			ErrorUnused:      true,
			WeaklyTypedInput: true,
			Result:           &cfg,
			DecodeHook: mapstructure.ComposeDecodeHookFunc(
				mapstructure.StringToTimeDurationHookFunc(),
				commaSlice,
			),
		},
	})
	if err != nil {
		src := "environment"
		if path != "" {
			src = path + " or the environment"
		}
		return cfg, path, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "config: %s: %s (every key is in docs/configuration.md)", src, decodeProblems(err))
	}
	return cfg, path, nil
}

// decodeProblems turns mapstructure's multi-line report ("decoding failed
// due to the following error(s):\n\n'egress' has invalid keys: bogus")
// into its problems, joined by "; ".
func decodeProblems(err error) string {
	var out []string
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "* "))
		if line == "" || strings.HasPrefix(line, "decoding failed due to") || strings.HasSuffix(line, "error(s) decoding:") {
			continue
		}
		out = append(out, strings.ReplaceAll(line, "has invalid keys", "has unknown keys"))
	}
	if len(out) == 0 {
		return err.Error()
	}
	return strings.Join(out, "; ")
}

// commaSlice splits a string (from the environment) into a list.
func commaSlice(from, to reflect.Type, data any) (any, error) {
	if from.Kind() != reflect.String || to.Kind() != reflect.Slice {
		return data, nil
	}
	s := data.(string)
	if s == "" {
		return []string{}, nil
	}
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts, nil
}

func lookupEnv(environ []string, name string) string {
	for _, kv := range environ {
		if n, v, ok := strings.Cut(kv, "="); ok && n == name {
			return v
		}
	}
	return ""
}

// describeConfig renders the effective configuration for `config check`:
// secrets appear as where they come from, never as values.
func describeConfig(cfg fileConfig, path string) map[string]any {
	src := path
	if src == "" {
		src = "(none: embedded defaults)"
	}
	return map[string]any{"file": src, "config": configTree(reflect.ValueOf(cfg))}
}

// configTree is v as the configuration file spells it: structs as maps
// keyed by their koanf keys, durations as "10s" rather than nanoseconds.
func configTree(v reflect.Value) any {
	if v.Type() == reflect.TypeOf(time.Duration(0)) {
		return time.Duration(v.Int()).String()
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return configTree(v.Elem())
	case reflect.Struct:
		out := map[string]any{}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			key, opts, _ := strings.Cut(f.Tag.Get("koanf"), ",")
			if f.Anonymous && key == "" && opts == "squash" {
				// Its keys sit beside the struct's own (limits.*).
				if sub, ok := configTree(v.Field(i)).(map[string]any); ok {
					maps.Copy(out, sub)
				}
				continue
			}
			if !f.IsExported() || key == "" || key == "-" {
				continue
			}
			out[key] = configTree(v.Field(i))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return map[string]any{}
		}
		out := map[string]any{}
		for it := v.MapRange(); it.Next(); {
			out[fmt.Sprint(it.Key().Interface())] = configTree(it.Value())
		}
		return out
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return []any{}
		}
		out := make([]any, v.Len())
		for i := range v.Len() {
			out[i] = configTree(v.Index(i))
		}
		return out
	default:
		return v.Interface()
	}
}
