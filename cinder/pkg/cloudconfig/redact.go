// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cloudconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf16"
)

// redacted replaces a secret wherever one was found.
const redacted = "<redacted>"

// secretTag marks the Config fields that hold credentials.
const secretTag = "secret"

// secrets are the values of c's fields tagged secret: taken from the struct
// itself, so that a new credential field needs only its tag.
func (c *Config) secrets() []string {
	v := reflect.ValueOf(c).Elem()
	var values []string
	for i := range v.NumField() {
		if v.Type().Field(i).Tag.Get(secretTag) != "true" {
			continue
		}
		if s := v.Field(i).String(); s != "" {
			values = append(values, s)
		}
	}
	return values
}

// Redact replaces every secret of c in s, as written and in the forms a
// server quoting a request may echo it, with <redacted>.
func (c *Config) Redact(s string) string {
	return redactValues(s, c.secrets())
}

// redactValues replaces each of secrets in s, in every form an echo may
// give it (echoedPattern), with <redacted>.
func redactValues(s string, secrets []string) string {
	for _, secret := range secrets {
		if secret != "" {
			s = echoedPattern(secret).ReplaceAllLiteralString(s, redacted)
		}
	}
	return s
}

// echoedPattern matches secret in each of its echoedForms, and each of
// those inside an HTML page (a proxy's error page quoting the request):
// any character but a letter or digit may be written as an HTML entity,
// named (&quot; &apos; &amp; &lt; &gt;, in any case), decimal (&#39;,
// &#039;) or hex (&#x27;, &#X00027;).
func echoedPattern(secret string) *regexp.Regexp {
	forms := echoedForms(secret)
	alts := make([]string, len(forms))
	for i, f := range forms {
		var b strings.Builder
		for _, r := range f {
			b.WriteString(htmlRune(r))
		}
		alts[i] = b.String()
	}
	return regexp.MustCompile(strings.Join(alts, "|"))
}

// htmlNames are the named entities of the characters HTML escapers name.
var htmlNames = map[rune]string{'&': "amp", '<': "lt", '>': "gt", '"': "quot", '\'': "apos"}

// htmlRune is a pattern for r as written or as an HTML entity.
func htmlRune(r rune) string {
	literal := regexp.QuoteMeta(string(r))
	if r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
		return literal
	}
	alt := fmt.Sprintf(`%s|&#0*%d;|&#[xX]0*(?i:%x);`, literal, r, r)
	if name, ok := htmlNames[r]; ok {
		alt += `|&(?i:` + name + `);`
	}
	return "(?:" + alt + ")"
}

// redactError returns err with c's secrets redacted from its message; err
// itself when it carries none, so that errors.Is and errors.As still see
// through it.
func (c *Config) redactError(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if clean := c.Redact(msg); clean != msg {
		return errors.New(clean)
	}
	return err
}

// echoedForms are secret as written, URL-encoded, and inside a JSON string
// once or twice (an error message quoting a JSON request), as Go writes it
// (with or without escaping <, > and &) and as Python's json.dumps does
// (Keystone's: non-ASCII as \uXXXX). Longest first, so that a form is
// replaced before a shorter one inside it.
func echoedForms(secret string) []string {
	inJSON := jsonEscapings(secret)
	forms := append([]string{secret, url.QueryEscape(secret), url.PathEscape(secret)}, inJSON...)
	for _, f := range inJSON {
		forms = append(forms, jsonEscapings(f)...)
	}
	slices.SortFunc(forms, func(a, b string) int {
		if d := len(b) - len(a); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return slices.Compact(forms)
}

// jsonEscapings are s inside a JSON string, without the quotes, as Go and
// Python write it.
func jsonEscapings(s string) []string {
	forms := []string{pythonJSON(s)}
	for _, escapeHTML := range []bool{true, false} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(escapeHTML)
		if err := enc.Encode(s); err == nil {
			quoted := strings.TrimSuffix(b.String(), "\n")
			forms = append(forms, quoted[1:len(quoted)-1])
		}
	}
	return forms
}

// pythonJSON is secret inside a JSON string as Python's json.dumps
// (ensure_ascii, Keystone's default) writes it.
func pythonJSON(secret string) string {
	var b strings.Builder
	for _, r := range secret {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r > 0x7e:
			if r1, r2 := utf16.EncodeRune(r); r1 != '\uFFFD' {
				fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// redactingTransport redacts c's secrets from every error answer (status
// 400 and up) before gophercloud reads it: Keystone's, Cinder's or a
// proxy's, whatever they echo of a request, and wherever the error then
// goes (login, re-authentication, any Cinder call, events).
//
// Keystone's session tokens are credentials too: the one a request carries
// (X-Auth-Token) and those Keystone issued (X-Subject-Token) are redacted
// alike, the last few remembered for a proxy that quotes an older one.
type redactingTransport struct {
	next   http.RoundTripper
	config *Config

	mu     sync.Mutex
	tokens []string
}

// rememberedTokens bounds the session tokens kept for redaction: a token
// lives hours, re-authentication replaces it.
const rememberedTokens = 4

// remember adds the non-empty tokens to those redacted and returns them all
// with c's secrets.
func (t *redactingTransport) remember(tokens ...string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tok := range tokens {
		if tok != "" && !slices.Contains(t.tokens, tok) {
			t.tokens = append(t.tokens, tok)
		}
	}
	if n := len(t.tokens); n > rememberedTokens {
		t.tokens = slices.Delete(t.tokens, 0, n-rememberedTokens)
	}
	return append(t.config.secrets(), t.tokens...)
}

func (t *redactingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, t.config.redactError(err)
	}
	secrets := t.remember(req.Header.Get("X-Auth-Token"), resp.Header.Get("X-Subject-Token"))
	if resp.StatusCode < http.StatusBadRequest {
		return resp, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_ = resp.Body.Close()
	if err != nil {
		return nil, t.config.redactError(fmt.Errorf("reading the answer %d of %s: %w", resp.StatusCode, req.URL.Redacted(), err))
	}
	clean := []byte(redactValues(string(body), secrets))
	resp.Body = io.NopCloser(bytes.NewReader(clean))
	resp.ContentLength = int64(len(clean))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// maxErrorBody bounds what is kept of an error answer: enough for any
// message a user can act on.
const maxErrorBody = 64 << 10
