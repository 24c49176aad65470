// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cloudconfig

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
)

// fakeKeystone serves Keystone's v3 and v2.0 token APIs over https, with a
// catalog whose block-storage endpoint is served by the same server and
// checks the token.
type fakeKeystone struct {
	server *httptest.Server
	caFile string

	mu       sync.Mutex
	requests []map[string]any
	// cinderPaths are the paths of the Cinder requests, in order.
	cinderPaths []string
	// expired makes Cinder refuse the token and Keystone refuse every
	// login, echoing the password it was sent.
	expired bool
	// echoToken makes Cinder refuse every request, quoting its token.
	echoToken bool
}

const (
	fakeToken   = "gAAAAABfaketoken"
	fakeProject = "637b7373213d439d8119285244481456"
)

func newFakeKeystone(t *testing.T) *fakeKeystone {
	k := &fakeKeystone{}
	mux := http.NewServeMux()
	k.server = httptest.NewTLSServer(mux)
	t.Cleanup(k.server.Close)
	cinderURL := k.server.URL + "/volume/v3/" + fakeProject
	internalURL := k.server.URL + "/internal/volume/v3/" + fakeProject
	expires := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)

	mux.HandleFunc("POST /v3/auth/tokens", func(w http.ResponseWriter, r *http.Request) {
		body := k.record(t, r)
		pass, _ := dig(body, "auth", "identity", "password", "user", "password").(string)
		if methods, _ := dig(body, "auth", "identity", "methods").([]any); len(methods) == 1 && methods[0] == "token" {
			// The configured token stands for the password.
			pass, _ = dig(body, "auth", "identity", "token", "id").(string)
		}
		if methods, _ := dig(body, "auth", "identity", "methods").([]any); len(methods) == 1 && methods[0] == "application_credential" {
			pass, _ = dig(body, "auth", "identity", "application_credential", "secret").(string)
			if dig(body, "auth", "scope") != nil {
				// As Keystone answers.
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprint(w, `{"error": {"code": 401, "message": "Application credentials cannot request a scope."}}`)
				return
			}
		}
		if pass != secretPassword || k.isExpired() {
			// Echo the attempt, as a careless proxy might: the client must
			// not repeat it.
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error": {"code": 401, "message": "The request you have made requires authentication (tried %s)."}}`, pass)
			return
		}
		w.Header().Set("X-Subject-Token", fakeToken)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"token": {"expires_at": %q, "methods": ["password"],
			"project": {"id": %q, "name": "k8s", "domain": {"id": "default"}},
			"user": {"id": "u1", "name": "admin", "domain": {"id": "default"}},
			"catalog": [{"type": "volumev3", "name": "cinderv3", "id": "c1", "endpoints": [
				{"id": "e1", "interface": "public", "region": "RegionOne", "region_id": "RegionOne", "url": %q},
				{"id": "e2", "interface": "public", "region": "RegionTwo", "region_id": "RegionTwo", "url": "https://elsewhere.invalid/v3"},
				{"id": "e3", "interface": "internal", "region": "RegionOne", "region_id": "RegionOne", "url": %q}]}]}}`,
			expires, fakeProject, cinderURL, internalURL)
	})
	mux.HandleFunc("POST /v2.0/tokens", func(w http.ResponseWriter, r *http.Request) {
		k.record(t, r)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access": {"token": {"id": %q, "expires": %q, "tenant": {"id": %q, "name": "k8s"}},
			"serviceCatalog": [{"type": "volumev3", "name": "cinderv3", "endpoints": [{"region": "RegionOne", "publicURL": %q}]}],
			"user": {"id": "u1", "name": "admin"}}}`, fakeToken, expires, fakeProject, cinderURL)
	})
	volumesDetail := func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		k.cinderPaths = append(k.cinderPaths, r.URL.Path)
		k.mu.Unlock()
		k.mu.Lock()
		echo := k.echoToken
		k.mu.Unlock()
		if echo {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"badRequest": {"code": 400, "message": "Invalid request with X-Auth-Token: %s"}}`, r.Header.Get("X-Auth-Token"))
			return
		}
		if r.Header.Get("X-Auth-Token") != fakeToken || k.isExpired() {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"volumes": [{"id": "v1", "name": "pvc-1", "status": "available", "size": 1}]}`)
	}
	mux.HandleFunc("GET /volume/v3/"+fakeProject+"/volumes/detail", volumesDetail)
	mux.HandleFunc("GET /internal/volume/v3/"+fakeProject+"/volumes/detail", volumesDetail)

	k.caFile = filepath.Join(t.TempDir(), "ca.pem")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: k.server.Certificate().Raw})
	if err := os.WriteFile(k.caFile, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	return k
}

func (k *fakeKeystone) record(t *testing.T, r *http.Request) map[string]any {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		t.Errorf("token request body: %v", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.requests = append(k.requests, body)
	return body
}

func (k *fakeKeystone) isExpired() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.expired
}

func (k *fakeKeystone) lastRequest() map[string]any {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.requests[len(k.requests)-1]
}

func dig(m any, path ...string) any {
	for _, p := range path {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[p]
	}
	return m
}

// listVolumes proves the client reaches the catalog's Cinder with the token.
func listVolumes(t *testing.T, c *Config) {
	t.Helper()
	client, err := NewBlockStorageClient(t.Context(), c, "cinder-provisioner/test")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := volumes.List(client, nil).AllPages(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	vols, err := volumes.ExtractVolumes(pages)
	if err != nil || len(vols) != 1 || vols[0].Name != "pvc-1" {
		t.Fatalf("volumes = %v, %v", vols, err)
	}
}

func TestKeystoneV3WithCustomCA(t *testing.T) {
	k := newFakeKeystone(t)
	c, err := Parse(fmt.Sprintf(`[Global]
auth-url = %s/v3
username = admin
password = %q
tenant-id = %s
region = RegionOne
ca-file = %s
`, k.server.URL, secretPassword, fakeProject, k.caFile), "cloud.conf")
	if err != nil {
		t.Fatal(err)
	}
	listVolumes(t, c)
	req := k.lastRequest()
	if got := dig(req, "auth", "identity", "password", "user", "domain", "id"); got != DefaultDomainID {
		t.Errorf("user domain = %v, want %s (the default)", got, DefaultDomainID)
	}
	if got := dig(req, "auth", "scope", "project", "id"); got != fakeProject {
		t.Errorf("scope = %v", dig(req, "auth", "scope"))
	}
}

func TestKeystoneV3ProjectNameAndTrust(t *testing.T) {
	k := newFakeKeystone(t)
	c, err := FromEnv(env(map[string]string{
		"OS_AUTH_URL": k.server.URL + "/v3", "OS_USERNAME": "admin", "OS_PASSWORD": secretPassword,
		"OS_PROJECT_NAME": "k8s", "OS_USER_DOMAIN_NAME": "corp", "OS_REGION_NAME": "RegionOne", "OS_CACERT": k.caFile,
	}))
	if err != nil {
		t.Fatal(err)
	}
	listVolumes(t, c)
	req := k.lastRequest()
	if dig(req, "auth", "scope", "project", "name") != "k8s" || dig(req, "auth", "scope", "project", "domain", "name") != "corp" ||
		dig(req, "auth", "identity", "password", "user", "domain", "name") != "corp" {
		t.Errorf("token request = %v", req)
	}

	c.TrustID = "trust-1"
	listVolumes(t, c)
	if got := dig(k.lastRequest(), "auth", "scope", "OS-TRUST:trust", "id"); got != "trust-1" {
		t.Errorf("trust scope = %v", dig(k.lastRequest(), "auth", "scope"))
	}
}

// The original documentation's auth-url ends in /v2.0: that still works
// where Keystone serves v2.0.
func TestKeystoneV2URLAsWritten(t *testing.T) {
	k := newFakeKeystone(t)
	c, err := Parse(fmt.Sprintf("[Global]\nauth-url=%s/v2.0\nusername=admin\npassword=%s\nregion=RegionOne\ntenant-id=%s\nca-file=%s\n",
		k.server.URL, secretPassword, fakeProject, k.caFile), "cloud.conf")
	if err != nil {
		t.Fatal(err)
	}
	listVolumes(t, c)
	if got := dig(k.lastRequest(), "auth", "tenantId"); got != fakeProject {
		t.Errorf("v2 token request = %v", k.lastRequest())
	}
}

func TestKeystoneErrors(t *testing.T) {
	k := newFakeKeystone(t)
	base := Config{Mode: AuthKeystone, AuthURL: k.server.URL + "/v3", Username: "admin", TenantID: fakeProject, DomainID: "default", Region: "RegionOne", CAFile: k.caFile, Source: "test"}

	wrong := base
	wrong.Password = "wrong-" + secretPassword
	_, err := NewBlockStorageClient(t.Context(), &wrong, "test")
	if err == nil || !strings.Contains(err.Error(), "logging in to Keystone at "+k.server.URL) {
		t.Errorf("err = %v", err)
	} else if strings.Contains(err.Error(), secretPassword) || !strings.Contains(err.Error(), "<redacted>") {
		t.Errorf("error must show Keystone's answer with the password redacted: %v", err)
	}

	noCA := base
	noCA.Password, noCA.CAFile = secretPassword, ""
	if _, err := NewBlockStorageClient(t.Context(), &noCA, "test"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without ca-file: err = %v, want a certificate error", err)
	}

	region := base
	region.Password, region.Region = secretPassword, "Nowhere"
	if _, err := NewBlockStorageClient(t.Context(), &region, "test"); err == nil || !strings.Contains(err.Error(), `region "Nowhere"`) {
		t.Errorf("unknown region: err = %v", err)
	}

	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	badCA := base
	badCA.Password, badCA.CAFile = secretPassword, notPEM
	if _, err := NewBlockStorageClient(t.Context(), &badCA, "test"); err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Errorf("bad ca-file: err = %v", err)
	}
}

// When the token expires and logging in again fails, the error a user sees
// (in events: it is what a Cinder call returns) carries neither the
// credential nor what Keystone answered, in every auth mode.
func TestFailedReauthenticationIsScrubbed(t *testing.T) {
	for mode, keys := range map[string]string{
		"password":                     "username = admin\npassword = %s\ntenant-id = " + fakeProject + "\ndomain-name = Default",
		"application credential by id": "application-credential-id = cred1\napplication-credential-secret = %s",
		"trust with trustee":           "username = admin\npassword = other\ntrust-id = t1\ntrustee-id = u2\ntrustee-password = %s",
	} {
		t.Run(mode, func(t *testing.T) {
			k, err := listingError(t, keys, func(k *fakeKeystone) *bool { return &k.expired })
			if err == nil {
				t.Fatal("listing with an expired token and a failing re-login succeeded")
			}
			msg := err.Error()
			if strings.Contains(msg, secretPassword) || strings.Contains(msg, "requires authentication") {
				t.Fatalf("error after a failed re-authentication leaks the credential or Keystone's answer: %s", msg)
			}
			if !strings.Contains(msg, "re-authenticating with Keystone at "+k.server.URL+"/v3: it answered 401") {
				t.Errorf("error does not say what failed: %s", msg)
			}
		})
	}
}

// The Keystone session token (X-Subject-Token) is a credential too: a
// Cinder error that quotes it is redacted (issue 36 case 6).
func TestSessionTokenIsRedacted(t *testing.T) {
	_, err := listingError(t, "username = admin\npassword = %s\ntenant-id = "+fakeProject+"\ndomain-name = Default",
		func(k *fakeKeystone) *bool { return &k.echoToken })
	if err == nil {
		t.Fatal("listing succeeded against a Cinder that refuses everything")
	}
	if msg := err.Error(); strings.Contains(msg, fakeToken) || !strings.Contains(msg, "Invalid request with X-Auth-Token: <redacted>") {
		t.Errorf("Cinder's error quoting the session token: %s; want the token redacted and the rest kept", msg)
	}
}

// listingError logs in to a fake Keystone with the cloud config keys
// (secretPassword in place of their %s), then sets the fault's flag and
// returns the error of a listing.
func listingError(t *testing.T, keys string, fault func(*fakeKeystone) *bool) (*fakeKeystone, error) {
	t.Helper()
	k := newFakeKeystone(t)
	c, err := Parse(fmt.Sprintf("[Global]\nauth-url = %s/v3\nca-file = %s\n"+keys+"\n", k.server.URL, k.caFile, secretPassword), "cloud.conf")
	if err != nil {
		t.Fatal(err)
	}
	client, err := NewBlockStorageClient(t.Context(), c, "cinder-provisioner/test")
	if err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	*fault(k) = true
	k.mu.Unlock()
	_, err = volumes.List(client, nil).AllPages(t.Context())
	return k, err
}
