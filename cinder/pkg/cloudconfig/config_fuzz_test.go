// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cloudconfig

import (
	"net/url"
	"strings"
	"testing"

	"gopkg.in/gcfg.v1"
)

// FuzzParse feeds a cloud config file in which every @PW@ is replaced by a
// credential (credMarker followed by the fuzzed secret). Parse must not
// panic, must never show the credential in its error or in String when it
// sits only where credentials go (password, the user info of a URL), and a
// configuration it accepts must be usable as it is.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, content, secret string) {
		file := strings.ReplaceAll(content, "@PW@", credMarker+secret)
		c, err := Parse(file, "cloud.conf")
		var text string
		if err != nil {
			text = err.Error()
		} else {
			assertUsable(t, c)
			text = c.String()
		}
		if onlyInCredentials(file) && strings.Contains(text, credMarker) {
			t.Fatalf("the credential shows in %q", text)
		}
	})
}

// credMarker starts every fuzzed credential; nothing else in a message can
// contain it by chance.
const credMarker = "Zx9Qv"

// onlyInCredentials reports whether every credMarker of file ends up in a
// password or in the user info of an endpoint URL, as gcfg reads the file.
func onlyInCredentials(file string) bool {
	var w wire
	_ = gcfg.ReadStringInto(&w, file) // what is read before an error counts
	n := 0
	for _, g := range w.Global { // every cloud's section
		n += strings.Count(g.Password, credMarker) + strings.Count(g.ApplicationCredentialSecret, credMarker) +
			strings.Count(g.TrusteePassword, credMarker) + strings.Count(g.Token, credMarker)
		for _, raw := range []string{g.AuthURL, g.CinderEndpoint} {
			if u, err := url.Parse(raw); err == nil && u.User != nil {
				n += strings.Count(u.User.String(), credMarker)
			}
		}
	}
	return n == strings.Count(file, credMarker)
}

// assertUsable checks what the client builder relies on.
func assertUsable(t *testing.T, c *Config) {
	t.Helper()
	endpoint := c.AuthURL
	switch c.Mode {
	case AuthKeystone:
		if c.CinderEndpoint != "" {
			t.Fatalf("Keystone and noauth configuration accepted: %+v", c)
		}
		if c.Token != "" {
			if c.Password != "" || c.Username != "" || c.UserID != "" || c.ApplicationCredential() {
				t.Fatalf("a token with other credentials accepted: %+v", c)
			}
		} else if c.ApplicationCredential() {
			if c.ApplicationCredentialSecret == "" || (c.ApplicationCredentialID == "" && c.Username == "" && c.UserID == "") {
				t.Fatalf("incomplete application credential accepted: %+v", c)
			}
		} else if (c.Username == "" && c.UserID == "" && c.TrusteeID == "") || (c.Password == "" && c.TrusteePassword == "") || (c.Project() == "" && c.TrustID == "") {
			t.Fatalf("incomplete Keystone configuration accepted: %+v", c)
		}
		for _, d := range [][2]string{{c.DomainID, c.DomainName}, {c.UserDomainID, c.UserDomainName}, {c.ProjectDomainID, c.ProjectDomainName}} {
			if d[0] != "" && d[1] != "" {
				t.Fatalf("Keystone configuration with domain id %q and name %q accepted", d[0], d[1])
			}
		}
		if id, name := c.userDomain(); (id == "") == (name == "") {
			t.Fatalf("user domain id %q name %q", id, name)
		}
	case AuthNoAuth:
		endpoint = c.CinderEndpoint
		if c.AuthURL != "" || c.Project() == "" {
			t.Fatalf("incomplete noauth configuration accepted: %+v", c)
		}
	default:
		t.Fatalf("configuration without a mode accepted: %+v", c)
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		t.Fatalf("endpoint %q accepted", endpoint)
	}
}
