package browser

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"

	"github.com/airlockhq/airlock"
)

func pathErr(format string, args ...any) error {
	return airlock.Errorf(airlock.CodeDenied, airlock.ReasonPathEscape, "browser: "+format, args...)
}

// confine maps a caller's path to a file under root, refusing before any
// browser call what could leave it: an empty path, a NUL, any ".."
// element, an absolute path outside root, and (through EvalSymlinks of the
// deepest existing ancestor) a symlink that leads out. It returns the
// absolute path.
func confine(root, p string) (string, error) {
	if root == "" {
		return "", airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNoFilesDir, "browser: the session has no files directory")
	}
	if p == "" || strings.ContainsRune(p, 0) {
		return "", pathErr("path %q is empty or has a NUL", p)
	}
	for _, el := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		if el == ".." {
			return "", pathErr("path %q has a .. element", p)
		}
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return "", pathErr("files directory: %v", err)
	}
	if err := os.MkdirAll(absRoot, 0o700); err != nil {
		return "", airlock.Errorf(airlock.CodeInternal, airlock.ReasonFilesDir, "browser: files directory: %v", err)
	}
	realRoot, err := filepath.EvalSymlinks(absRoot)
	if err != nil {
		return "", pathErr("files directory: %v", err)
	}
	full := filepath.Join(absRoot, p)
	if filepath.IsAbs(p) {
		full = filepath.Clean(p)
	}
	if !within(absRoot, full) && !within(realRoot, full) {
		return "", pathErr("path %q is outside the session's files directory", p)
	}
	// The deepest existing ancestor (the file itself when it exists) must
	// resolve inside the root.
	probe := full
	for {
		if _, err := os.Lstat(probe); err == nil {
			break
		}
		parent := filepath.Dir(probe)
		if parent == probe {
			break
		}
		probe = parent
	}
	real, err := filepath.EvalSymlinks(probe)
	if err != nil || !within(realRoot, real) {
		return "", pathErr("path %q leads outside the session's files directory", p)
	}
	return full, nil
}

// within reports whether p is root or under it.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// FilesDir is the session's root for uploads, downloads and screenshots.
func (s *Session) FilesDir() string { return s.opts.FilesDir }

// Upload sets the file input ref to the file at path, relative to the
// session's files directory (see confine).
//
// Errors: denied (path_escape), invalid (stale_ref, no_file, not_file_input),
// timeout, unavailable (browser_crashed).
func (s *Session) Upload(ctx context.Context, ref, path string) error {
	full, err := confine(s.opts.FilesDir, path)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(full); err != nil || !fi.Mode().IsRegular() {
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNoFile, "browser: upload: %q is not a file in the session's files directory", path)
	}
	b, e, err := s.beginRef(ctx, ref)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, err := cdp.Call(ctx, b.target, dom.SetFileInputFiles, dom.SetFileInputFilesParams{Files: []string{full}, BackendNodeID: e.backend}); err != nil {
		if msg := err.Error(); strings.Contains(msg, "Node is not a file input") {
			return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNotFileInput, "browser: upload %s: a %s is not a file input", ref, e.role)
		}
		return nodeErr(ctx, b, ref, "upload", err)
	}
	return nil
}
