package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/extract"
	"github.com/airlockhq/airlock/internal/render"
)

func init() {
	registerCommand("extract", newExtractCmd)
	registerCommand("__pdftext", newPDFTextCmd)
}

func newExtractCmd(e *env) *cobra.Command {
	var base, contentType, mode, format string
	var maxBytes int64
	cmd := &cobra.Command{
		Use:   "extract [--url BASE] [--format json|md|text|org] FILE|-",
		Short: "Extract a saved page (HTML, text, JSON, XML or PDF) into a Page, offline",
		Long: `Read a saved response body from FILE (or standard input for -) and print it as a
Page: title, metadata, headings, links, main text and Markdown, tables. No network
is used: --url only names the page, as the base of its relative links and the host
of its internal links. The content type is sniffed unless --content-type is given.
A captcha or bot-challenge page is an error (upstream, bot_wall), not content.`,
		Example: `  airlock extract --url https://example.com/post page.html
  curl -s https://example.com/ | airlock extract --format md --url https://example.com/ -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := render.ParseFormat(format)
			if err != nil || f == render.FormatJSONL {
				return usageErrorf("extract: --format must be json, md, text or org, not %q", format)
			}
			if f == render.FormatJSON {
				e.format = formatJSON // errors as JSON too
			} else {
				e.format = formatText
			}
			if mode != airlock.ExtractFull && mode != airlock.ExtractNone {
				return usageErrorf("extract: --extract must be full or none, not %q", mode)
			}
			if maxBytes <= 0 {
				return usageErrorf("extract: --max-bytes must be positive")
			}
			body, err := readInput(e.stdin, args[0], maxBytes)
			if err != nil {
				return err
			}
			p, err := extract.Extract(cmd.Context(), extract.Input{URL: base, Body: body, ContentType: contentType},
				extract.Options{Mode: mode, MaxInputBytes: maxBytes})
			if err != nil {
				return err
			}
			return render.Render(e.stdout, f, p)
		},
	}
	cmd.Flags().StringVar(&base, "url", "", "the page's URL: base of relative links, host of internal links")
	cmd.Flags().StringVar(&format, "format", render.FormatText, "output format: json, md (or markdown), text or org")
	cmd.Flags().StringVar(&contentType, "content-type", "", "the response's Content-Type (default: sniffed)")
	cmd.Flags().StringVar(&mode, "extract", airlock.ExtractFull, "full, or none: links and metadata only")
	cmd.Flags().Int64Var(&maxBytes, "max-bytes", extract.DefaultMaxInputBytes, "largest input accepted")
	return cmd
}

// readInput reads FILE, or standard input for "-", refusing more than max
// bytes.
func readInput(stdin io.Reader, name string, max int64) ([]byte, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonFile, "extract: %w", err) // a bad argument: exit 2
		}
		defer f.Close()
		r = f
	}
	body, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("extract: read %s: %w", name, err)
	}
	if int64(len(body)) > max {
		return nil, airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonInputTooLarge,
			"extract: %s is larger than %d bytes", name, max)
	}
	return body, nil
}

// newPDFTextCmd is the child process of PDF extraction (see
// extract.PDFCommand): PDF on standard input, text on standard output.
func newPDFTextCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:    extract.PDFSubcommand,
		Short:  "Read a PDF on standard input and write its text (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return extract.RunPDFChild(e.stdout, e.stdin)
		},
	}
}
