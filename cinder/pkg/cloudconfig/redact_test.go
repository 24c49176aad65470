// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cloudconfig

import (
	"reflect"
	"regexp"
	"testing"
)

// A field named like a credential must be tagged secret, so that Redact
// knows it: adding one without the tag fails here.
func TestCredentialFieldsAreTaggedSecret(t *testing.T) {
	credential := regexp.MustCompile(`(?i)password|secret|token|passphrase`)
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		tagged := f.Tag.Get(secretTag) == "true"
		if credential.MatchString(f.Name) && !tagged {
			t.Errorf("Config.%s holds a credential but is not tagged %s:\"true\"", f.Name, secretTag)
		}
		if tagged && f.Type.Kind() != reflect.String {
			t.Errorf("Config.%s is tagged secret but is a %s: Config.secrets reads strings only", f.Name, f.Type)
		}
	}
	c := &Config{Password: "p", ApplicationCredentialSecret: "a", TrusteePassword: "t", Username: "u", UserID: "i"}
	if got, want := c.secrets(), []string{"p", "a", "t"}; !reflect.DeepEqual(got, want) {
		t.Errorf("secrets = %q, want %q", got, want)
	}
}

// Each way a server may quote a secret is redacted.
func TestRedactEchoedForms(t *testing.T) {
	c := &Config{TrusteePassword: `pa"ss<é😀>&\x`}
	for encoding, echoed := range map[string]string{
		"as written":                   `pa"ss<é😀>&\x`,
		"JSON, Go":                     `pa\"ss\u003cé😀\u003e\u0026\\x`,
		"JSON, Go without HTML escape": `pa\"ss<é😀>&\\x`,
		"JSON, Python ensure_ascii":    `pa\"ss<\u00e9\ud83d\ude00>&\\x`,
		"JSON in JSON, Go":             `pa\\\"ss\\u003cé😀\\u003e\\u0026\\\\x`,
		"URL query":                    `pa%22ss%3C%C3%A9%F0%9F%98%80%3E%26%5Cx`,
		// An HTML error page of a proxy quoting the request (issue 36
		// case 6): named, decimal and hex entities, as html.EscapeString,
		// PHP's htmlspecialchars and nginx-style pages write them.
		"HTML, Go html.EscapeString": `pa&#34;ss&lt;é😀&gt;&amp;\x`,
		"HTML, named":                `pa&quot;ss&lt;é😀&gt;&amp;\x`,
		"HTML, hex":                  `pa&#x22;ss&#x3C;&#xe9;&#x1F600;&#x3e;&#x26;&#x5c;x`,
		"HTML, decimal padded":       `pa&#034;ss&#060;&#233;&#128512;&#062;&#038;&#092;x`,
		"HTML of JSON, Go":           `pa\&quot;ss\u003cé😀\u003e\u0026\\x`,
	} {
		if got := c.Redact("Keystone said: " + echoed + "."); got != "Keystone said: <redacted>." {
			t.Errorf("%s: %q redacted to %q", encoding, echoed, got)
		}
	}
	quote := &Config{Password: `it's-"me"`}
	for _, echoed := range []string{`it&#39;s-&quot;me&quot;`, `it&#x27;s-&#34;me&#34;`, `it&apos;s-&QUOT;me&QUOT;`, `it&#039;s-&#x00022;me&#X22;`} {
		if got := quote.Redact("<p>" + echoed + "</p>"); got != "<p><redacted></p>" {
			t.Errorf("HTML %q redacted to %q", echoed, got)
		}
	}
	if got := (&Config{}).Redact("nothing secret"); got != "nothing secret" {
		t.Errorf("without secrets: %q", got)
	}
}
