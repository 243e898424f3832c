package gate

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// ReadSecret reads a tenant secret or route credential from exactly one
// of the environment variable env (through getenv) and the file file,
// whose trailing newline is dropped. An unset variable, a missing file
// and an empty value are errors that name where the value was looked for,
// never the value.
func ReadSecret(env, file string, getenv func(string) string) ([]byte, error) {
	switch {
	case env != "" && file != "":
		return nil, errors.New("set exactly one of env and file")
	case env != "":
		v := getenv(env)
		if v == "" {
			return nil, fmt.Errorf("environment variable %s is not set", env)
		}
		return []byte(v), nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", file, errors.Unwrap(err))
		}
		v := strings.TrimRight(string(b), "\r\n")
		if v == "" {
			return nil, fmt.Errorf("%s is empty", file)
		}
		return []byte(v), nil
	}
	return nil, errors.New("set env or file")
}
