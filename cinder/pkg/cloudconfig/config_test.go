// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cloudconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const secretPassword = "Passw0rd!-do-not-log"

// The four configurations of the original standalone Cinder provisioner's
// documentation must work as they were written.
func TestOriginalDocumentationExamples(t *testing.T) {
	keystoneFile := `# Example configuration: keystone auth via cloudconfig
[Global]
auth-url=http://keystone-host:5000/v2.0
username=admin
password=Passw0rd!
region=RegionOne
tenant-id=637b7373213d439d8119285244481456
`
	c, err := Parse(keystoneFile, "cloud.conf")
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Mode: AuthKeystone, AuthURL: "http://keystone-host:5000/v2.0", Username: "admin", Password: "Passw0rd!",
		Region: "RegionOne", TenantID: "637b7373213d439d8119285244481456", DomainID: DefaultDomainID, Source: "cloud config cloud.conf"}
	if *c != want {
		t.Errorf("keystone file = %+v, want %+v", *c, want)
	}

	noauthFile := `# Example configuration: noauth via cloudconfig
[Global]
cinder-endpoint=http://cinder-host:8776/v2
username=admin
tenant-name=admin
`
	c, err = Parse(noauthFile, "cloud.conf")
	if err != nil {
		t.Fatal(err)
	}
	want = Config{Mode: AuthNoAuth, CinderEndpoint: "http://cinder-host:8776/v2", Username: "admin", TenantName: "admin", Source: "cloud config cloud.conf"}
	if *c != want {
		t.Errorf("noauth file = %+v, want %+v", *c, want)
	}
	client, err := NewBlockStorageClient(t.Context(), c, "test")
	if err != nil {
		t.Fatal(err)
	}
	if client.Endpoint != "http://cinder-host:8776/v2/admin/" {
		t.Errorf("noauth endpoint = %s", client.Endpoint)
	}

	c, err = FromEnv(env(map[string]string{
		"OS_AUTH_URL": "http://keystone-host:5000/v2.0", "OS_USERNAME": "admin", "OS_PASSWORD": "Passw0rd!",
		"OS_TENANT_ID": "637b7373213d439d8119285244481456", "OS_REGION_NAME": "RegionOne",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Mode != AuthKeystone || c.AuthURL != "http://keystone-host:5000/v2.0" || c.TenantID != "637b7373213d439d8119285244481456" || c.Region != "RegionOne" || c.Password != "Passw0rd!" {
		t.Errorf("keystone env = %+v", c)
	}

	c, err = FromEnv(env(map[string]string{"OS_CINDER_ENDPOINT": "http://cinder-host:8776/v2", "OS_USERNAME": "admin", "OS_TENANT_NAME": "admin"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Mode != AuthNoAuth || c.CinderEndpoint != "http://cinder-host:8776/v2" || c.TenantName != "admin" {
		t.Errorf("noauth env = %+v", c)
	}
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseAllKeys(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Parse(`[Global]
auth-url = https://keystone:5000/v3
user-id = 0f3a
password = "`+secretPassword+`"
tenant-name = k8s
domain-name = Default
region = RegionTwo
trust-id = 3e0c
ca-file = `+ca+`

[BlockStorage]
bs-version = v3
[LoadBalancer]
subnet-id = x
`, "f")
	if err != nil {
		t.Fatal(err)
	}
	if c.UserID != "0f3a" || c.Password != secretPassword || c.TenantName != "k8s" || c.DomainName != "Default" || c.DomainID != "" ||
		c.Region != "RegionTwo" || c.TrustID != "3e0c" || c.CAFile != ca {
		t.Errorf("config = %+v", c)
	}
	if strings.Contains(c.String(), secretPassword) {
		t.Errorf("String() shows the password: %s", c)
	}
}

func TestFromEnvAliasesAndConflicts(t *testing.T) {
	c, err := FromEnv(env(map[string]string{
		"OS_AUTH_URL": "https://keystone/v3", "OS_USERNAME": "u", "OS_PASSWORD": "p",
		"OS_PROJECT_ID": "abc", "OS_PROJECT_NAME": "proj", "OS_USER_DOMAIN_NAME": "corp", "OS_CACERT": "",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.TenantID != "abc" || c.TenantName != "proj" || c.UserDomainName != "corp" || c.DomainName != "" || c.Source != "environment" {
		t.Errorf("config = %+v", c)
	}

	_, err = FromEnv(env(map[string]string{"OS_CINDER_ENDPOINT": "http://c/v3", "OS_TENANT_ID": "a", "OS_PROJECT_ID": "b"}))
	if err == nil || !strings.Contains(err.Error(), "OS_TENANT_ID and OS_PROJECT_ID are both set") {
		t.Errorf("err = %v", err)
	}

	_, err = FromEnv(env(nil))
	if err == nil || !strings.Contains(err.Error(), "--cloud-config") || !strings.Contains(err.Error(), "OS_AUTH_URL") {
		t.Errorf("err = %v", err)
	}
}

// Every error names the key at fault, as the source spells it, and none
// shows the password.
func TestErrorsNameTheKey(t *testing.T) {
	cases := map[string]struct {
		file string
		env  map[string]string
		want []string
	}{
		"unknown keys": {
			file: "[Global]\nauth-url=http://k/v3\nusername=u\npassword=" + secretPassword + "\ntenant-id=t\nregion-name=x\nuser-domain=d\n",
			want: []string{"unknown key(s) region-name, user-domain in [Global]", "known keys are auth-url", "user-domain-name", "application-credential-id"},
		},
		"no endpoint": {
			file: "[Global]\nusername=u\npassword=" + secretPassword + "\n",
			want: []string{"set auth-url (Keystone) or cinder-endpoint (noauth)"},
		},
		"both modes": {
			file: "[Global]\nauth-url=http://k/v3\ncinder-endpoint=http://c/v3\ntenant-id=t\n",
			want: []string{"both auth-url (Keystone) and cinder-endpoint (noauth) are set"},
		},
		"keystone without credentials": {
			file: "[Global]\nauth-url=http://k/v3\n",
			want: []string{"Keystone needs username or user-id", "Keystone needs password", "tenant-id, tenant-name or trust-id"},
		},
		"bad url": {
			file: "[Global]\nauth-url=keystone:5000\nusername=u\npassword=" + secretPassword + "\ntenant-id=t\n",
			want: []string{`auth-url: "keystone:5000" is not an http(s) URL`},
		},
		"credentials in url": {
			file: "[Global]\ncinder-endpoint=http://admin:" + secretPassword + "@c/v3\ntenant-id=t\n",
			want: []string{"cinder-endpoint: credentials in the URL are not supported"},
		},
		"credentials in a url of another scheme": {
			file: "[Global]\nauth-url=ftp://admin:" + secretPassword + "@k/v3\nusername=u\npassword=p\ntenant-id=t\n",
			want: []string{"auth-url: credentials in the URL are not supported; use the username and password keys"},
		},
		"credentials in a url without host": {
			file: "[Global]\ncinder-endpoint=http://admin:" + secretPassword + "@\ntenant-id=t\n",
			want: []string{"cinder-endpoint: credentials in the URL are not supported"},
		},
		"password with an unterminated quote": {
			file: "[Global]\nauth-url=http://k/v3\nusername=u\ntenant-id=t\npassword=\"" + secretPassword + "\n",
			want: []string{"cloud config f: 5:10: string not terminated"},
		},
		"two domains": {
			file: "[Global]\nauth-url=http://k/v3\nusername=u\npassword=" + secretPassword + "\ntenant-name=t\ndomain-id=d\ndomain-name=D\n",
			want: []string{"set one of domain-id or domain-name"},
		},
		"noauth without project": {
			file: "[Global]\ncinder-endpoint=http://c/v3\n",
			want: []string{"noauth needs tenant-id or tenant-name"},
		},
		"missing ca file": {
			file: "[Global]\ncinder-endpoint=http://c/v3\ntenant-id=t\nca-file=/nonexistent/ca.pem\n",
			want: []string{"ca-file: stat /nonexistent/ca.pem"},
		},
		"syntax error": {
			file: "[Global\nauth-url=x\n",
			want: []string{"cloud config f:"},
		},
		"env keystone without password": {
			env:  map[string]string{"OS_AUTH_URL": "http://k/v3", "OS_USERNAME": "u", "OS_TENANT_NAME": "t"},
			want: []string{"environment: Keystone needs OS_PASSWORD"},
		},
		"env noauth without project": {
			env:  map[string]string{"OS_CINDER_ENDPOINT": "http://c/v3", "OS_PASSWORD": secretPassword},
			want: []string{"OS_TENANT_ID (or OS_PROJECT_ID) or OS_TENANT_NAME (or OS_PROJECT_NAME)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var err error
			if tc.env != nil {
				_, err = FromEnv(env(tc.env))
			} else {
				_, err = Parse(tc.file, "f")
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), secretPassword) {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cloud.conf")
	if err := os.WriteFile(path, []byte("[Global]\ncinder-endpoint=http://c:8776/v3\ntenant-id=0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Mode != AuthNoAuth || c.Source != "cloud config "+path {
		t.Errorf("config = %+v", c)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing"), ""); err == nil || !strings.Contains(err.Error(), "--cloud-config") {
		t.Errorf("err = %v", err)
	}
}
