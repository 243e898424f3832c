// Package hostile is the standing hostile-input suite: the real engine
// (engine.New, in memory, a floor exception for 127.0.0.1 only) against
// loopback servers that misbehave on purpose — decompression bombs,
// endless and trickled bodies, slow, numerous and huge response headers,
// redirect loops and chains, connection resets, lying content types, a
// 50 MB robots.txt, sitemap bombs, a page of a million links, hostile PDFs
// and hostile HTML.
//
// Each case runs in a child process (this test binary run again) so that
// its peak resident memory can be read from the kernel (rusage maxrss) and
// held under a bound that scales with the cap under test. A case asserts
// the typed error (code and reason) or the capped result, that the call
// ended because of the cap the case configures, and, as a hang guard only,
// that it ended within ten times its configured timeout.
//
// The package has no code outside its tests.
package hostile
