// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeprov/external-storage/test/framework"
)

// TestBinaryLoginErrorShowsNoSecret: the binary, pointed at a Keystone that
// refuses the login and echoes the whole request back (as a debugging
// Keystone or a careless proxy does), stops with Keystone's answer in its
// output but no credential of the cloud config, for each auth mode; the
// same behind a proxy whose HTML error page quotes the request
// HTML-escaped (issue 36 case 6). Keystone here is a stand-in on loopback:
// the stack of this package runs Cinder without Keystone.
func TestBinaryLoginErrorShowsNoSecret(t *testing.T) {
	bin := framework.BuildTestBinary(t, "cinder", "cinder-provisioner")
	keystone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error": {"code": 401, "message": "The request you have made requires authentication.", "request": %s}}`, body)
	}))
	defer keystone.Close()
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprintf(w, "<html><body><h1>502 Bad Gateway</h1><p>The upstream refused the request you have made: <pre>%s</pre></p></body></html>", html.EscapeString(string(body)))
	}))
	defer proxy.Close()
	// Each secret ends in a marker no encoding changes, and holds
	// characters JSON and HTML escape.
	const (
		password        = `pw<"1'">-PasswordMarker`
		credentialValue = `cred&<'2>-CredentialMarker`
		trusteePassword = `trustee\<"3>-TrusteeMarker`
		token           = `tok&<'4'>-TokenMarker`
	)
	for server, url := range map[string]string{"Keystone": keystone.URL, "HTML proxy": proxy.URL} {
		t.Run(server, func(t *testing.T) {
			loginErrorShowsNoSecret(t, bin, url, password, credentialValue, trusteePassword, token)
		})
	}
}

// loginErrorShowsNoSecret runs the binary against the Keystone at url with
// each auth mode's secrets.
func loginErrorShowsNoSecret(t *testing.T, bin, url, password, credentialValue, trusteePassword, token string) {
	for name, keys := range map[string]string{
		"password":                       fmt.Sprintf("username=admin\npassword=%q\ntenant-id=p1", password),
		"application credential by id":   fmt.Sprintf("application-credential-id=c1\napplication-credential-secret=%q", credentialValue),
		"application credential by name": fmt.Sprintf("username=admin\napplication-credential-name=c1\napplication-credential-secret=%q", credentialValue),
		"trust":                          fmt.Sprintf("username=admin\npassword=%q\ntrust-id=t1\ntrustee-id=u2\ntrustee-password=%q", password, trusteePassword),
		"token":                          fmt.Sprintf("token=%q\ntenant-id=p1", token),
	} {
		t.Run(name, func(t *testing.T) {
			conf := filepath.Join(t.TempDir(), "cloud.conf")
			if err := os.WriteFile(conf, []byte("[Global]\nauth-url="+url+"/v3\n"+keys+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx := framework.TestContext(t, time.Minute)
			out, err := exec.CommandContext(ctx, bin, "--cloud-config", conf, "--kubeconfig", cp.KubeconfigPath, "-v", "5").CombinedOutput()
			if err == nil {
				t.Fatalf("the binary logged in to a Keystone that refuses everyone:\n%s", out)
			}
			for _, marker := range []string{"PasswordMarker", "CredentialMarker", "TrusteeMarker", "TokenMarker"} {
				if strings.Contains(string(out), marker) {
					t.Errorf("the binary's output shows a secret (%s):\n%s", marker, out)
				}
			}
			if !strings.Contains(string(out), "logging in to Keystone at "+url) || !strings.Contains(string(out), "<redacted>") {
				t.Errorf("want the failed login with Keystone's answer, redacted; output:\n%s", out)
			}
		})
	}
}
