package gate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	withNewline := filepath.Join(dir, "key")
	empty := filepath.Join(dir, "empty")
	os.WriteFile(withNewline, []byte("s3cret\r\n"), 0o600)
	os.WriteFile(empty, []byte("\n"), 0o600)
	getenv := func(k string) string { return map[string]string{"SET": "from-env"}[k] }
	for _, tt := range []struct {
		name, env, file string
		want, wantErr   string
	}{
		{name: "env", env: "SET", want: "from-env"},
		{name: "unset env", env: "UNSET", wantErr: "environment variable UNSET is not set"},
		{name: "file, newline dropped", file: withNewline, want: "s3cret"},
		{name: "empty file", file: empty, wantErr: "is empty"},
		{name: "missing file", file: filepath.Join(dir, "none"), wantErr: "no such file"},
		{name: "both", env: "SET", file: withNewline, wantErr: "exactly one"},
		{name: "neither", wantErr: "set env or file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadSecret(tt.env, tt.file, getenv)
			switch {
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("ReadSecret = %q, %v; want an error with %q", got, err, tt.wantErr)
			case tt.wantErr == "" && (err != nil || string(got) != tt.want):
				t.Errorf("ReadSecret = %q, %v; want %q", got, err, tt.want)
			case err != nil && strings.Contains(err.Error(), "s3cret"):
				t.Errorf("error %v shows the secret", err)
			}
		})
	}
}
