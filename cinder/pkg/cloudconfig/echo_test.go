// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cloudconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// echoingKeystone refuses every login and echoes the whole request body in
// its answer, as a careless proxy or a debugging Keystone might: once as
// sent, once re-encoded inside the error message.
func echoingKeystone(t *testing.T) *httptest.Server {
	t.Helper()
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading the login request: %v", err)
		}
		var decoded any
		if err := json.Unmarshal(body, &decoded); err != nil {
			t.Errorf("login request is not JSON: %v", err)
		}
		var reencoded bytes.Buffer
		enc := json.NewEncoder(&reencoded)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(decoded); err != nil {
			t.Error(err)
		}
		message, _ := json.Marshal(fmt.Sprintf("The request you have made requires authentication: %s", strings.TrimSpace(reencoded.String())))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error": {"code": 401, "message": %s, "request": %s}}`, message, body)
	}))
	t.Cleanup(server.Close)
	return server
}

// A failed login never shows a credential of any auth mode, however the
// server quoted it; what the server said otherwise stays, for the admin.
func TestLoginErrorsRedactEverySecret(t *testing.T) {
	keystone := echoingKeystone(t)
	// Characters that JSON escapes, so that a check of the raw value
	// alone misses the echo; each secret ends in a marker that no encoding
	// changes, so that no form of it can pass unseen.
	const (
		password        = `pw-"quoted"<&>-é-PasswordMarker`
		credentialValue = `appcred-<secret>&"x"-CredentialMarker`
		trusteePassword = `trustee-\back<slash>-TrusteeMarker`
		token           = `tok-<"en">&-TokenMarker`
	)
	markers := map[string]string{password: "PasswordMarker", credentialValue: "CredentialMarker", trusteePassword: "TrusteeMarker", token: "TokenMarker"}
	for name, tc := range map[string]struct {
		file    string
		secrets []string
	}{
		"password": {file: fmt.Sprintf("username=admin\npassword=%q\ntenant-id=p1", password), secrets: []string{password}},
		"application credential by id": {file: fmt.Sprintf("application-credential-id=cred1\napplication-credential-secret=%q", credentialValue),
			secrets: []string{credentialValue}},
		"application credential by name": {file: fmt.Sprintf("username=admin\napplication-credential-name=cred1\napplication-credential-secret=%q", credentialValue),
			secrets: []string{credentialValue}},
		"trust with trustee": {file: fmt.Sprintf("username=admin\npassword=%q\ntrust-id=t1\ntrustee-id=u2\ntrustee-password=%q", password, trusteePassword),
			secrets: []string{password, trusteePassword}},
		"token": {file: fmt.Sprintf("token=%q\ntenant-id=p1", token), secrets: []string{token}},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := Parse("[Global]\nauth-url="+keystone.URL+"/v3\n"+tc.file+"\n", "cloud.conf")
			if err != nil {
				t.Fatal(err)
			}
			for _, secret := range tc.secrets {
				if secret != c.Password && secret != c.ApplicationCredentialSecret && secret != c.TrusteePassword && secret != c.Token {
					t.Fatalf("secret %q was not read from the file: %+v", secret, c)
				}
			}
			_, err = NewBlockStorageClient(t.Context(), c, "test")
			if err == nil {
				t.Fatal("login succeeded against a Keystone that refuses everyone")
			}
			msg := err.Error()
			for _, secret := range tc.secrets {
				if strings.Contains(msg, markers[secret]) {
					t.Errorf("the login error shows secret %q, in some form: %s", secret, msg)
				}
			}
			if !strings.Contains(msg, "requires authentication") || !strings.Contains(msg, "<redacted>") {
				t.Errorf("the login error should keep Keystone's answer, with the secret redacted: %s", msg)
			}
		})
	}
}
