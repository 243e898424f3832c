package browser

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/page"

	"github.com/airlockhq/airlock"
)

// MaxDownloadBytes caps one download; a larger one is cancelled.
const MaxDownloadBytes = 100 << 20

// DefaultDownloadTimeout bounds a download when ctx has no deadline.
const DefaultDownloadTimeout = 2 * time.Minute

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

// Download fetches rawURL through the browser (so through both layers and
// with the session's cookies) into destPath under the session's files
// directory, and returns the number of bytes written. The current page
// stays where it is.
//
// Errors: denied (path_escape, or the policy's reason), too_large
// (download_size), upstream (download_failed), timeout, unavailable
// (browser_crashed).
func (s *Session) Download(ctx context.Context, rawURL, destPath string) (int64, error) {
	dest, err := confine(s.opts.FilesDir, destPath)
	if err != nil {
		return 0, err
	}
	if fi, err := os.Lstat(dest); err == nil && !fi.Mode().IsRegular() {
		return 0, pathErr("download destination %q exists and is not a regular file", destPath)
	}
	if err := s.checkURL(rawURL); err != nil {
		return 0, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDownloadTimeout)
		defer cancel()
	}
	b, err := s.begin()
	if err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	tmp, err := os.MkdirTemp(s.opts.FilesDir, ".download-")
	if err != nil {
		return 0, airlock.Errorf(airlock.CodeInternal, airlock.ReasonFilesDir, "browser: download: %v", err)
	}
	defer os.RemoveAll(tmp)
	progress := cdp.Events(ctx, b.browser, cdpbrowser.DownloadProgress)
	begin := cdp.Events(ctx, b.browser, cdpbrowser.DownloadWillBegin)
	if _, err := cdp.Call(ctx, b.browser, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
		Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: tmp, EventsEnabled: new(true),
	}); err != nil {
		return 0, cdpErr(ctx, b, "download", err)
	}
	defer cdp.Call(context.WithoutCancel(ctx), b.browser, cdpbrowser.SetDownloadBehavior,
		cdpbrowser.SetDownloadBehaviorParams{Behavior: cdpbrowser.SetDownloadBehaviorBehaviorDeny})
	res, err := cdp.Call(ctx, b.target, page.Navigate, page.NavigateParams{URL: rawURL})
	if err != nil {
		return 0, cdpErr(ctx, b, "download", err)
	}
	// A download aborts the navigation; any other error means nothing
	// was downloaded.
	if res.ErrorText != "" && !strings.Contains(res.ErrorText, "ERR_ABORTED") {
		if strings.Contains(res.ErrorText, "ERR_BLOCKED_BY_CLIENT") {
			return 0, airlock.Errorf(airlock.CodeDenied, airlock.ReasonBlocked, "browser: download %s: blocked by policy", rawURL)
		}
		return 0, airlock.Errorf(airlock.CodeUpstream, airlock.ReasonDownloadFailed, "browser: download %s: %s", rawURL, res.ErrorText)
	}
	var guid string
	for ev, err := range begin {
		if err != nil {
			return 0, downloadWaitErr(ctx, b, rawURL, err)
		}
		guid = ev.GUID
		break
	}
	for ev, err := range progress {
		if err != nil {
			return 0, downloadWaitErr(ctx, b, rawURL, err)
		}
		if ev.GUID != guid {
			continue
		}
		if ev.ReceivedBytes > MaxDownloadBytes || ev.TotalBytes > MaxDownloadBytes {
			cdp.Call(context.WithoutCancel(ctx), b.browser, cdpbrowser.CancelDownload, cdpbrowser.CancelDownloadParams{GUID: guid})
			return 0, airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonDownloadSize, "browser: download %s: over the %d-byte cap", rawURL, MaxDownloadBytes)
		}
		switch ev.State {
		case cdpbrowser.DownloadProgressStateCompleted:
			if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil {
				return 0, airlock.Errorf(airlock.CodeInternal, airlock.ReasonFilesDir, "browser: download: %v", err)
			}
			if err := os.Rename(filepath.Join(tmp, guid), dest); err != nil {
				return 0, airlock.Errorf(airlock.CodeInternal, airlock.ReasonFilesDir, "browser: download: %v", err)
			}
			return int64(ev.ReceivedBytes), nil
		case cdpbrowser.DownloadProgressStateCanceled:
			return 0, airlock.Errorf(airlock.CodeUpstream, airlock.ReasonDownloadFailed, "browser: download %s: cancelled (refused, or the connection failed)", rawURL)
		}
	}
	return 0, downloadWaitErr(ctx, b, rawURL, ctx.Err())
}

func downloadWaitErr(ctx context.Context, b *instance, raw string, err error) error {
	if ctx.Err() != nil && !b.lost() {
		return airlock.Errorf(airlock.CodeTimeout, airlock.ReasonBrowserTimeout, "browser: download %s: no download started or finished in time", raw)
	}
	if err == nil {
		err = errors.New("event stream ended")
	}
	return cdpErr(ctx, b, "download", err)
}
