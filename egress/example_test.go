package egress_test

import (
	"fmt"
	"net/netip"

	"github.com/airlockhq/airlock/egress"
)

func ExampleParseURL() {
	t, err := egress.ParseURL("HTTPS://Bücher.Example.:443/a?b=c#frag")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(t.Host, t.Port, t.IsIP())
	fmt.Println(t)

	// Ambiguous forms are refused with a reason, never guessed.
	for _, raw := range []string{
		"http://0x7f.1/",
		"http://user@example.com/",
		`http://example.com\@127.0.0.1/`,
		"ftp://example.com/",
	} {
		_, err := egress.ParseURL(raw)
		fmt.Println(egress.CodeOf(err), egress.ReasonOf(err))
	}
	// Output:
	// xn--bcher-kva.example 443 false
	// https://xn--bcher-kva.example/a?b=c
	// denied numeric_host
	// denied userinfo
	// denied parse_ambiguous
	// denied scheme
}

func ExamplePolicy_Compile() {
	checker, err := egress.Policy{
		Lanes:      []egress.Lane{egress.LaneHTTP},
		Allow:      []string{"*.example.com", "10.0.0.0/8:8080"},
		Deny:       []string{"admin.example.com"},
		Exceptions: []string{"10.1.2.3:8080"}, // an intranet host below the floor
	}.Compile()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range []struct {
		name string
		addr string
		port uint16
	}{
		{"www.example.com", "93.184.216.34", 443},
		{"admin.example.com", "93.184.216.34", 443},
		{"", "10.1.2.3", 8080},
		{"", "10.1.2.4", 8080},
		{"www.example.com", "169.254.169.254", 80},
		{"other.example", "93.184.216.34", 443},
	} {
		v := checker.CheckAddr(egress.LaneHTTP, c.name, netip.MustParseAddr(c.addr), c.port)
		fmt.Println(v)
	}
	// Output:
	// allow allowed ("*.example.com")
	// deny deny_list ("admin.example.com")
	// allow exception ("10.0.0.0/8:8080")
	// deny private
	// deny metadata
	// deny not_allowed
}

func ExampleClassify() {
	for _, s := range []string{
		"8.8.8.8",
		"127.0.0.1",
		"100.64.0.1",
		"169.254.169.254",
		"::ffff:10.0.0.1",
		"2002:808:808::1",
		"2606:4700::1111",
	} {
		a := netip.MustParseAddr(s)
		fmt.Printf("%s %q %q\n", s, egress.Classify(a), egress.ClassifyUnwrapped(a))
	}
	// Output:
	// 8.8.8.8 "" ""
	// 127.0.0.1 "loopback" "loopback"
	// 100.64.0.1 "cgnat" "cgnat"
	// 169.254.169.254 "metadata" "metadata"
	// ::ffff:10.0.0.1 "ipv4_embedded" "private"
	// 2002:808:808::1 "ipv4_embedded" ""
	// 2606:4700::1111 "" ""
}
