package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// A denial carries its decision id from the caller's error to the audit log.
func ExampleEngine_HTTP_denied() {
	ctx := context.Background()
	e, err := engine.New(context.Background(), engine.Config{InMemory: true}) // tenant "local", profile posix, the default policy
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close(ctx)

	_, err = e.HTTP(ctx, e.Principal(), airlock.HTTPRequest{URL: "http://169.254.169.254/latest/meta-data/"})
	var ae *airlock.Error
	if errors.As(err, &ae) {
		fmt.Println(ae.Code, ae.Reason, len(ae.DecisionID))
	}

	if err := e.FlushAudit(ctx); err != nil {
		log.Fatal(err)
	}
	recs, err := e.AuditQuery(ctx, airlock.AuditQuery{Outcome: "deny"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(recs[0].ID == ae.DecisionID, recs[0].Broker, recs[0].Reason)
	// Output:
	// denied metadata 26
	// true http metadata
}

// Sign computes an HMAC with a secret the caller never sees.
func ExampleEngine_Sign() {
	ctx := context.Background()
	getenv := func(name string) string {
		if name == "WEBHOOK_KEY" {
			return "example-key"
		}
		return ""
	}
	e, err := engine.New(context.Background(), engine.Config{
		InMemory: true,
		Tenants: map[string]engine.TenantConfig{
			"local": {Profile: "minimal", Secrets: map[string]engine.SecretRef{"webhook": {Env: "WEBHOOK_KEY"}}},
		},
	}, engine.WithGetenv(getenv))
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close(ctx)

	sum, _, err := e.Sign(ctx, e.Principal(), "webhook", []byte("hello"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%x\n", sum)

	// minimal has no http capability: the method is absent for the tenant.
	_, err = e.HTTP(ctx, e.Principal(), airlock.HTTPRequest{URL: "https://example.com/"})
	fmt.Println(airlock.CodeOf(err), airlock.ReasonOf(err))
	// Output:
	// a866e07b5eafdf688740211b767b111eb9ce3c0da0b1ec77f1e9205ee440dbf6
	// denied capability
}

// Revoking a principal stops its next call (and cancels those in flight).
func ExampleEngine_Revoke() {
	ctx := context.Background()
	e, err := engine.New(context.Background(), engine.Config{InMemory: true})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close(ctx)

	guest := airlock.Principal{Tenant: "local", Instance: "guest-1"}
	if err := e.Revoke(ctx, guest.String(), "misbehaving"); err != nil {
		log.Fatal(err)
	}
	_, err = e.HTTP(ctx, guest, airlock.HTTPRequest{URL: "https://example.com/"})
	fmt.Println(airlock.CodeOf(err), airlock.ExitCode(err))

	if err := e.Unrevoke(ctx, guest.String()); err != nil {
		log.Fatal(err)
	}
	fmt.Println(e.Revocations())
	// Output:
	// revoked 3
	// []
}
