// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"fmt"
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
// output but no credential of the cloud config, for each auth mode.
// Keystone here is a stand-in on loopback: the stack of this package runs
// Cinder without Keystone.
func TestBinaryLoginErrorShowsNoSecret(t *testing.T) {
	bin := framework.BuildTestBinary(t, "cinder", "cinder-provisioner")
	keystone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error": {"code": 401, "message": "The request you have made requires authentication.", "request": %s}}`, body)
	}))
	defer keystone.Close()
	// Each secret ends in a marker no encoding changes, and holds
	// characters JSON escapes.
	const (
		password        = `pw<"1">-PasswordMarker`
		credentialValue = `cred&<2>-CredentialMarker`
		trusteePassword = `trustee\<3>-TrusteeMarker`
		token           = `tok&<4>-TokenMarker`
	)
	for name, keys := range map[string]string{
		"password":                       fmt.Sprintf("username=admin\npassword=%q\ntenant-id=p1", password),
		"application credential by id":   fmt.Sprintf("application-credential-id=c1\napplication-credential-secret=%q", credentialValue),
		"application credential by name": fmt.Sprintf("username=admin\napplication-credential-name=c1\napplication-credential-secret=%q", credentialValue),
		"trust":                          fmt.Sprintf("username=admin\npassword=%q\ntrust-id=t1\ntrustee-id=u2\ntrustee-password=%q", password, trusteePassword),
		"token":                          fmt.Sprintf("token=%q\ntenant-id=p1", token),
	} {
		t.Run(name, func(t *testing.T) {
			conf := filepath.Join(t.TempDir(), "cloud.conf")
			if err := os.WriteFile(conf, []byte("[Global]\nauth-url="+keystone.URL+"/v3\n"+keys+"\n"), 0o600); err != nil {
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
			if !strings.Contains(string(out), "logging in to Keystone at "+keystone.URL) || !strings.Contains(string(out), "<redacted>") {
				t.Errorf("want the failed login with Keystone's answer, redacted; output:\n%s", out)
			}
		})
	}
}
