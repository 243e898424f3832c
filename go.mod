module github.com/airlockhq/airlock

go 1.26.8

require (
	code.dny.dev/ssrf v0.3.0
	github.com/andybalholm/brotli v1.2.8
	github.com/google/go-cmp v0.7.0
	github.com/klauspost/compress v1.20.3
	github.com/miekg/dns v1.1.73
	github.com/nlnwa/whatwg-url v0.6.2
	github.com/refraction-networking/utls v1.8.2
	github.com/spf13/cobra v1.10.2
	golang.org/x/net v0.62.0
)

require (
	github.com/bits-and-blooms/bitset v1.20.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
