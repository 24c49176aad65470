// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cloudconfig

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// Each auth style of the OpenStack cloud provider's [Global] section and of
// the OS_* variables, as the fake Keystone receives it: the method, the user
// and its domain, and the scope (project by id or by name in its own
// domain, a trust, or none for an application credential).
func TestKeystoneAuthStyles(t *testing.T) {
	type want map[string]any // dig path ("auth.identity.methods") -> value; nil = absent
	cases := []struct {
		name string
		file string            // [Global] lines after auth-url and ca-file
		env  map[string]string // or OS_* besides OS_AUTH_URL and OS_CACERT
		want want
		// path is the Cinder endpoint used (os-endpoint-type).
		path string
	}{
		{
			name: "password, tenant-id, default domain",
			file: "username=admin\npassword=@PW@\ntenant-id=" + fakeProject,
			want: want{"auth.identity.methods": []any{"password"}, "auth.identity.password.user.name": "admin",
				"auth.identity.password.user.domain.id": "default", "auth.scope.project.id": fakeProject},
		},
		{
			name: "password, tenant-name, user and tenant domains apart",
			file: "username=admin\npassword=@PW@\ntenant-name=k8s\nuser-domain-name=people\ntenant-domain-name=projects\ndomain-id=ignored",
			want: want{"auth.identity.password.user.domain.name": "people", "auth.identity.password.user.domain.id": nil,
				"auth.scope.project.name": "k8s", "auth.scope.project.domain.name": "projects", "auth.scope.project.domain.id": nil},
		},
		{
			name: "project-* aliases, domain-name for both",
			file: "username=admin\npassword=@PW@\nproject-name=k8s\ndomain-name=corp",
			want: want{"auth.identity.password.user.domain.name": "corp", "auth.scope.project.name": "k8s", "auth.scope.project.domain.name": "corp"},
		},
		{
			name: "project-domain-id with user-domain-id",
			file: "username=admin\npassword=@PW@\ntenant-name=k8s\nuser-domain-id=u1\nproject-domain-id=p1",
			want: want{"auth.identity.password.user.domain.id": "u1", "auth.scope.project.domain.id": "p1"},
		},
		{
			name: "user-id needs no domain",
			file: "user-id=8f1e\npassword=@PW@\ntenant-name=k8s\ndomain-id=d1",
			want: want{"auth.identity.password.user.id": "8f1e", "auth.identity.password.user.domain": nil,
				"auth.scope.project.name": "k8s", "auth.scope.project.domain.id": "d1"},
		},
		{
			name: "application credential id",
			file: "application-credential-id=ac1\napplication-credential-secret=@PW@\ntenant-id=" + fakeProject,
			want: want{"auth.identity.methods": []any{"application_credential"}, "auth.identity.application_credential.id": "ac1",
				"auth.identity.application_credential.user": nil, "auth.identity.password": nil, "auth.scope": nil},
		},
		{
			name: "application credential name with the user",
			file: "application-credential-name=k8s-cred\napplication-credential-secret=@PW@\nusername=admin\nuser-domain-name=people",
			want: want{"auth.identity.methods": []any{"application_credential"}, "auth.identity.application_credential.name": "k8s-cred",
				"auth.identity.application_credential.user.name": "admin", "auth.identity.application_credential.user.domain.name": "people", "auth.scope": nil},
		},
		{
			name: "application credential wins over a password",
			file: "application-credential-id=ac1\napplication-credential-secret=@PW@\nusername=admin\npassword=other\ntenant-id=" + fakeProject,
			want: want{"auth.identity.methods": []any{"application_credential"}, "auth.identity.password": nil, "auth.scope": nil},
		},
		{
			name: "trust with trustee",
			file: "user-id=owner\npassword=not-this\ntrust-id=tr1\ntrustee-id=trustee1\ntrustee-password=@PW@",
			want: want{"auth.identity.password.user.id": "trustee1", "auth.scope.OS-TRUST:trust.id": "tr1", "auth.scope.project": nil},
		},
		{
			name: "token, tenant-id: rescoped by Keystone",
			file: "token=@PW@\ntenant-id=" + fakeProject,
			want: want{"auth.identity.methods": []any{"token"}, "auth.identity.token.id": secretPassword,
				"auth.identity.password": nil, "auth.scope.project.id": fakeProject},
		},
		{
			name: "token, tenant-name in its domain",
			file: "token=@PW@\ntenant-name=k8s\ntenant-domain-name=projects",
			want: want{"auth.identity.methods": []any{"token"}, "auth.scope.project.name": "k8s", "auth.scope.project.domain.name": "projects"},
		},
		{
			name: "env OS_TOKEN",
			env:  map[string]string{"OS_TOKEN": "@PW@", "OS_PROJECT_ID": fakeProject},
			want: want{"auth.identity.methods": []any{"token"}, "auth.identity.token.id": secretPassword, "auth.scope.project.id": fakeProject},
		},
		{
			name: "os-endpoint-type internal",
			file: "username=admin\npassword=@PW@\ntenant-id=" + fakeProject + "\nos-endpoint-type=internal",
			want: want{"auth.scope.project.id": fakeProject},
			path: "/internal/volume/v3/" + fakeProject + "/volumes/detail",
		},
		{
			name: "env password with project and user domains",
			env: map[string]string{"OS_USERNAME": "admin", "OS_PASSWORD": "@PW@", "OS_PROJECT_NAME": "k8s",
				"OS_USER_DOMAIN_ID": "u1", "OS_PROJECT_DOMAIN_NAME": "projects", "OS_INTERFACE": "internal"},
			want: want{"auth.identity.password.user.domain.id": "u1", "auth.scope.project.name": "k8s", "auth.scope.project.domain.name": "projects"},
			path: "/internal/volume/v3/" + fakeProject + "/volumes/detail",
		},
		{
			name: "env OS_DOMAIN_NAME for both",
			env:  map[string]string{"OS_USERNAME": "admin", "OS_PASSWORD": "@PW@", "OS_TENANT_NAME": "k8s", "OS_DOMAIN_NAME": "corp"},
			want: want{"auth.identity.password.user.domain.name": "corp", "auth.scope.project.domain.name": "corp"},
		},
		{
			name: "env application credential",
			env:  map[string]string{"OS_APPLICATION_CREDENTIAL_ID": "ac1", "OS_APPLICATION_CREDENTIAL_SECRET": "@PW@"},
			want: want{"auth.identity.methods": []any{"application_credential"}, "auth.identity.application_credential.id": "ac1", "auth.scope": nil},
		},
		{
			name: "env trust",
			env:  map[string]string{"OS_USER_ID": "u1", "OS_PASSWORD": "@PW@", "OS_TRUST_ID": "tr1"},
			want: want{"auth.identity.password.user.id": "u1", "auth.scope.OS-TRUST:trust.id": "tr1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newFakeKeystone(t)
			var c *Config
			var err error
			if tc.env != nil {
				m := map[string]string{"OS_AUTH_URL": k.server.URL + "/v3", "OS_CACERT": k.caFile, "OS_REGION_NAME": "RegionOne"}
				for n, v := range tc.env {
					m[n] = strings.ReplaceAll(v, "@PW@", secretPassword)
				}
				c, err = FromEnv(env(m))
			} else {
				file := fmt.Sprintf("[Global]\nauth-url=%s/v3\nca-file=%s\nregion=RegionOne\n%s\n", k.server.URL, k.caFile,
					strings.ReplaceAll(tc.file, "@PW@", `"`+secretPassword+`"`))
				c, err = Parse(file, "cloud.conf")
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(c.String(), secretPassword) {
				t.Errorf("String() shows the secret: %s", c)
			}
			listVolumes(t, c)
			req := k.lastRequest()
			for path, v := range tc.want {
				if got := dig(req, strings.Split(path, ".")...); !reflect.DeepEqual(got, v) {
					t.Errorf("%s = %#v, want %#v", path, got, v)
				}
			}
			wantPath := tc.path
			if wantPath == "" {
				wantPath = "/volume/v3/" + fakeProject + "/volumes/detail"
			}
			if p := k.cinderPaths[len(k.cinderPaths)-1]; p != wantPath {
				t.Errorf("Cinder reached at %s, want %s", p, wantPath)
			}
			if t.Failed() {
				t.Logf("token request: %v", req)
			}
		})
	}
}

// tls-insecure reaches an https Keystone whose certificate nothing trusts.
func TestTLSInsecure(t *testing.T) {
	k := newFakeKeystone(t)
	for _, setting := range []string{"[Global]\ntls-insecure=true\n", "env"} {
		var c *Config
		var err error
		if setting == "env" {
			c, err = FromEnv(env(map[string]string{"OS_AUTH_URL": k.server.URL + "/v3", "OS_USERNAME": "admin", "OS_PASSWORD": secretPassword,
				"OS_PROJECT_ID": fakeProject, "OS_REGION_NAME": "RegionOne", "OS_INSECURE": "true"}))
		} else {
			c, err = Parse(fmt.Sprintf("%sauth-url=%s/v3\nusername=admin\npassword=%s\ntenant-id=%s\nregion=RegionOne\n", setting, k.server.URL, secretPassword, fakeProject), "f")
		}
		if err != nil {
			t.Fatal(err)
		}
		if !c.TLSInsecure {
			t.Fatalf("%s: TLSInsecure not set", setting)
		}
		listVolumes(t, c)
	}
}

// Keys of the cloud provider's config that make no sense together, or that
// this provisioner does not support, are refused by name.
func TestAuthStyleErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		file string
		env  map[string]string
		want string
	}{
		"secret without credential":      {file: "username=u\npassword=p\ntenant-id=t\napplication-credential-secret=s", want: "application-credential-secret is set without application-credential-id or application-credential-name"},
		"credential without secret":      {file: "application-credential-id=a", want: "an application credential needs application-credential-secret"},
		"credential name without user":   {file: "application-credential-name=a\napplication-credential-secret=s", want: "application-credential-name needs username or user-id"},
		"credential with trust":          {file: "application-credential-id=a\napplication-credential-secret=s\ntrust-id=t", want: "trust-id cannot be used with an application credential"},
		"trustee without trust":          {file: "username=u\npassword=p\ntenant-id=t\ntrustee-id=x", want: "trustee-id and trustee-password are used only with trust-id"},
		"two user domains":               {file: "username=u\npassword=p\ntenant-id=t\nuser-domain-id=a\nuser-domain-name=b", want: "set one of user-domain-id or user-domain-name, not both"},
		"alias conflict":                 {file: "username=u\npassword=p\ntenant-id=a\nproject-id=b", want: "tenant-id and project-id are both set, to different values"},
		"tenant-domain alias conflict":   {file: "username=u\npassword=p\ntenant-name=a\ntenant-domain-name=x\nproject-domain-name=y", want: "tenant-domain-name and project-domain-name are both set"},
		"tls-insecure not a bool":        {file: "username=u\npassword=p\ntenant-id=t\ntls-insecure=maybe", want: `tls-insecure: "maybe" is not true or false`},
		"endpoint type":                  {file: "username=u\npassword=p\ntenant-id=t\nos-endpoint-type=private", want: `os-endpoint-type: "private" is not public, internal or admin`},
		"cert without key":               {file: "username=u\npassword=p\ntenant-id=t\ncert-file=/etc/hostname", want: "a client certificate needs both cert-file and key-file"},
		"clouds-file without use-clouds": {file: "username=u\npassword=p\ntenant-id=t\nclouds-file=/etc/openstack/clouds.yaml", want: "clouds-file and cloud are read only with use-clouds = true"},
		"missing clouds.yaml":            {file: "use-clouds=true\nclouds-file=/nonexistent/clouds.yaml", want: "/nonexistent/clouds.yaml"},
		"token with a password":          {file: "token=x\nusername=u\npassword=p\ntenant-id=t", want: "token replaces username, user-id, password"},
		"env token with a credential": {env: map[string]string{"OS_TOKEN": "x", "OS_APPLICATION_CREDENTIAL_ID": "a", "OS_APPLICATION_CREDENTIAL_SECRET": "s"},
			want: "OS_TOKEN (or OS_AUTH_TOKEN) replaces"},
		"env secret without credential": {env: map[string]string{"OS_USERNAME": "u", "OS_PASSWORD": "p", "OS_PROJECT_ID": "t", "OS_APPLICATION_CREDENTIAL_SECRET": "s"},
			want: "OS_APPLICATION_CREDENTIAL_SECRET is set without OS_APPLICATION_CREDENTIAL_ID or OS_APPLICATION_CREDENTIAL_NAME"},
		"env two project domains": {env: map[string]string{"OS_USERNAME": "u", "OS_PASSWORD": "p", "OS_PROJECT_NAME": "t", "OS_PROJECT_DOMAIN_ID": "a", "OS_PROJECT_DOMAIN_NAME": "b"},
			want: "set one of OS_PROJECT_DOMAIN_ID or OS_PROJECT_DOMAIN_NAME, not both"},
		"env insecure": {env: map[string]string{"OS_USERNAME": "u", "OS_PASSWORD": "p", "OS_PROJECT_ID": "t", "OS_INSECURE": "sure"}, want: `OS_INSECURE: "sure" is not true or false`},
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			if tc.env != nil {
				m := map[string]string{"OS_AUTH_URL": "https://keystone/v3"}
				for k, v := range tc.env {
					m[k] = v
				}
				_, err = FromEnv(env(m))
			} else {
				_, err = Parse("[Global]\nauth-url=https://keystone/v3\n"+tc.file+"\n", "f")
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
