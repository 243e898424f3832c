package cli

import (
	"errors"
	"os"
	"reflect"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
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

// loadConfig reads the configuration. path "" means $AIRLOCK_CONFIG, else
// ./airlock.yaml if present, else none. It returns the path actually read.
func loadConfig(path string, environ []string) (engine.Config, string, error) {
	var cfg engine.Config
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
			return cfg, path, airlock.Errorf(airlock.CodeInvalid, "config", "config: read %s: %v", path, errors.Unwrap(err))
		}
		if err := k.Load(rawbytes.Provider(b), yaml.Parser()); err != nil {
			return cfg, path, airlock.Errorf(airlock.CodeInvalid, "config", "config: %s: %v", path, err)
		}
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
			return cfg, path, airlock.Errorf(airlock.CodeInvalid, "config", "config: environment: %v", err)
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
		return cfg, path, airlock.Errorf(airlock.CodeInvalid, "config", "config: %s: %s", src, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return cfg, path, nil
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
func describeConfig(cfg engine.Config, path string) map[string]any {
	src := path
	if src == "" {
		src = "(none: embedded defaults)"
	}
	return map[string]any{"file": src, "config": cfg}
}
