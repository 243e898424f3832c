// Package render owns output formatting: a Page, a crawl or search results
// as json, jsonl, md, text or org. The surfaces (CLI, HTTP API, MCP) import
// it to format what the engine returns; it knows nothing of extraction.
//
// Org is the format with a grammar to protect: the output lands in org
// files that people and agents read and write, so nothing a page says may
// become structure (a headline, a drawer, a keyword, a link, an agenda
// entry). Two escapes, each org's own convention for its place:
//
//   - At the start of a line, a comma, as org escapes the content of source
//     and example blocks (org-escape-code-in-string): it goes after the
//     indentation, before any commas already there, so the escape is
//     reversible. It is applied to lines that org would read as a headline
//     ("* "), a keyword or block ("#+"), a comment ("# "), a drawer
//     (":NAME:", ":END:"), fixed-width text (": "), a planning line
//     ("SCHEDULED:", "DEADLINE:", "CLOSED:") or clock line ("CLOCK:"), a diary sexp ("%%("), a
//     footnote definition ("[fn:") or a LaTeX environment ("\begin{").
//   - Inside a line, a zero width space (U+200B), which is what the org
//     manual ("Escape Character") recommends for text that must not be
//     read as org syntax: it splits "[[" and "]]" (links), "[fn:" (footnote
//     references), "<" before a digit, "%%(" or "<" (active timestamps,
//     diary sexps, targets), "{{{" (macros) and "src_x{" / "call_x(" (inline
//     Babel), and, in headlines, a leading TODO, DONE or COMMENT, a leading
//     priority cookie and a trailing run of :tags:.
//
// Link descriptions have their brackets replaced by parentheses (org link
// descriptions cannot hold "]]"); link targets have "[", "]", "\",
// spaces and control characters percent-encoded, except the brackets of an
// IPv6 literal host, which get org's backslash escape (org 9.3 and later).
// Only http, https, ftp and mailto targets become links: org would offer
// to follow elisp:, shell: or file: links.
//
// The text formats (md, text, org) drop control characters other than tab
// and newline, so that a page cannot drive the reader's terminal.
package render
