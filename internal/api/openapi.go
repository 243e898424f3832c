package api

import (
	"bytes"
	_ "embed"
	"encoding/json"
)

// openapiJSON is the OpenAPI 3.1 document of every route, written by hand;
// TestOpenAPICoversRoutes fails when it and the route table disagree,
// TestOpenAPISchemasMatchTypes when a schema and its Go type do, and every
// API test when its traffic does not validate against it (contract_test.go).
//
//go:embed openapi.json
var openapiJSON []byte

// openAPIDocument returns the document with info.version set to version.
func openAPIDocument(version string) []byte {
	if version == "" {
		return openapiJSON
	}
	var doc map[string]any
	if err := json.Unmarshal(openapiJSON, &doc); err != nil {
		panic("api: openapi.json: " + err.Error()) // a test keeps it valid
	}
	doc["info"].(map[string]any)["version"] = version
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic("api: openapi.json: " + err.Error())
	}
	return append(b, '\n')
}

// OpenAPI returns a copy of the OpenAPI document the server serves at
// /api/openapi.json (without a version), for clients and contract tests.
func OpenAPI() []byte { return bytes.Clone(openapiJSON) }
