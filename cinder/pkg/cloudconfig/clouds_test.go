// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cloudconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeClouds writes clouds.yaml content into a directory of its own.
func writeClouds(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "clouds.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCloudsYAML: the OpenStack cloud provider's use-clouds, clouds-file and
// cloud: clouds.yaml fills what [Global] leaves empty ([Global] wins), the
// cloud is cloud, else OS_CLOUD, else the only one; the login that results
// reaches Keystone with clouds.yaml's credentials, which never show.
func TestCloudsYAML(t *testing.T) {
	k := newFakeKeystone(t)
	clouds := writeClouds(t, fmt.Sprintf(`clouds:
  other:
    auth: {auth_url: "https://elsewhere.invalid/v3", username: nobody, password: nothing}
    some_other_tool_key: true
  k8s:
    auth:
      auth_url: %s/v3
      username: clouds-user
      password: %q
      project_id: %s
      user_domain_name: people
    region_name: RegionOne
    interface: internal
    identity_api_version: 3
    cacert: %s
`, k.server.URL, secretPassword, fakeProject, k.caFile))

	c, err := ParseCloud(fmt.Sprintf("[Global]\nuse-clouds=true\nclouds-file=%s\ncloud=k8s\n", clouds), "cloud.conf", "", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Username != "clouds-user" || c.Password != secretPassword || c.Region != "RegionOne" || c.EndpointType != "internal" || c.CAFile != k.caFile {
		t.Errorf("clouds.yaml not applied: %s", c)
	}
	if s := c.String(); strings.Contains(s, secretPassword) || !strings.Contains(s, clouds) {
		t.Errorf("String() = %s; want the clouds.yaml path and no password", s)
	}
	listVolumes(t, c)
	req := k.lastRequest()
	for path, want := range map[string]any{"auth.identity.password.user.name": "clouds-user", "auth.identity.password.user.domain.name": "people",
		"auth.scope.project.id": fakeProject} {
		if got := dig(req, strings.Split(path, ".")...); !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", path, got, want)
		}
	}
	if p := k.cinderPaths[len(k.cinderPaths)-1]; p != "/internal/volume/v3/"+fakeProject+"/volumes/detail" {
		t.Errorf("Cinder reached at %s; want the internal endpoint (interface)", p)
	}

	// [Global] wins over clouds.yaml; OS_CLOUD names the cloud when cloud
	// does not; OS_CLIENT_CONFIG_FILE is the file when clouds-file is not set.
	c, err = ParseCloud("[Global]\nuse-clouds=true\nusername=global-user\nregion=RegionTwo\n", "cloud.conf", "",
		env(map[string]string{"OS_CLOUD": "k8s", "OS_CLIENT_CONFIG_FILE": clouds}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Username != "global-user" || c.Region != "RegionTwo" || c.Password != secretPassword {
		t.Errorf("[Global] must win over clouds.yaml: %s", c)
	}

	// A single cloud needs no name; verify: false is tls-insecure.
	single := writeClouds(t, "clouds:\n  only:\n    auth: {auth_url: \"https://keystone/v3\", token: tok, project_name: k8s}\n    verify: false\n")
	c, err = ParseCloud("[Global]\nuse-clouds=true\nclouds-file="+single+"\n", "cloud.conf", "", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Token != "tok" || c.TenantName != "k8s" || !c.TLSInsecure {
		t.Errorf("single cloud: token %t project %q insecure %t", c.Token != "", c.TenantName, c.TLSInsecure)
	}
}

// TestCloudsYAMLRefusals: what clouds.yaml can say that has no meaning
// here is refused with a message naming it and what to use instead.
func TestCloudsYAMLRefusals(t *testing.T) {
	two := writeClouds(t, "clouds:\n  a:\n    auth: {auth_url: \"https://k/v3\"}\n  b:\n    auth: {auth_url: \"https://k/v3\"}\n")
	for name, tc := range map[string]struct {
		yaml, cloud string
		want        string
	}{
		"unknown key":           {yaml: "clouds:\n  c:\n    auth: {auth_url: \"https://k/v3\", passwrd: x}\n", want: `unknown field "passwrd"`},
		"regions":               {yaml: "clouds:\n  c:\n    regions: [a, b]\n", want: "regions is not supported: set region_name"},
		"auth type":             {yaml: "clouds:\n  c:\n    auth_type: v3oidcpassword\n", want: `auth_type "v3oidcpassword" is not supported`},
		"system scope":          {yaml: "clouds:\n  c:\n    auth: {system_scope: all}\n", want: "system_scope is not supported"},
		"public cloud profile":  {yaml: "clouds:\n  c:\n    profile: vexxhost\n", want: "clouds-public.yaml"},
		"volume api version":    {yaml: "clouds:\n  c:\n    volume_api_version: 2\n", want: "volume_api_version 2 is not supported"},
		"interface conflict":    {yaml: "clouds:\n  c:\n    interface: public\n    endpoint_type: internal\n", want: "interface and endpoint_type are both set"},
		"no such cloud":         {yaml: "clouds:\n  a: {}\n  b: {}\n", cloud: "c", want: `has no cloud "c"; it has a, b`},
		"several, none chosen":  {yaml: "clouds:\n  a: {}\n  b: {}\n", want: "has clouds a, b: select one with cloud"},
		"secure.yaml beside it": {yaml: "secure", want: "secure.yaml is not read"},
	} {
		t.Run(name, func(t *testing.T) {
			path := two
			if tc.yaml == "secure" {
				if err := os.WriteFile(filepath.Join(filepath.Dir(path), "secure.yaml"), []byte("clouds: {}\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				defer func() { _ = os.Remove(filepath.Join(filepath.Dir(path), "secure.yaml")) }()
			} else {
				path = writeClouds(t, tc.yaml)
			}
			file := "[Global]\nuse-clouds=true\nclouds-file=" + path + "\n"
			if tc.cloud != "" {
				file += "cloud=" + tc.cloud + "\n"
			} else if tc.yaml == "secure" {
				file += "cloud=a\n"
			}
			_, err := ParseCloud(file, "cloud.conf", "", env(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "use-clouds") {
				t.Errorf("err = %v; want %q, under use-clouds", err, tc.want)
			}
		})
	}
}

// TestGlobalSubsections: [Global "name"] sections are clouds of their own,
// selected with --cloud-name as in cinder-csi-plugin; [Global] is the
// default. A name the file lacks is refused, listing what it has.
func TestGlobalSubsections(t *testing.T) {
	file := `[Global]
cinder-endpoint=http://default:8776/v3
tenant-id=0123
[Global "east"]
cinder-endpoint=http://east:8776/v3
tenant-id=4567
[Global "west"]
auth-url=https://keystone.west/v3
application-credential-id=ac1
application-credential-secret=s
`
	for cloud, want := range map[string]string{"": "http://default:8776/v3", "east": "http://east:8776/v3"} {
		c, err := ParseCloud(file, "cloud.conf", cloud, env(nil))
		if err != nil {
			t.Fatalf("%q: %v", cloud, err)
		}
		if c.CinderEndpoint != want {
			t.Errorf("cloud %q: endpoint %s, want %s", cloud, c.CinderEndpoint, want)
		}
	}
	c, err := ParseCloud(file, "cloud.conf", "west", env(nil))
	if err != nil || c.ApplicationCredentialID != "ac1" || c.CinderEndpoint != "" || !strings.Contains(c.Source, `[Global "west"]`) {
		t.Errorf("cloud west: %v, %+v", err, c)
	}
	if _, err := ParseCloud(file, "cloud.conf", "north", env(nil)); err == nil || !strings.Contains(err.Error(), `[Global "east"], [Global "west"]`) {
		t.Errorf("missing cloud: %v", err)
	}
	if _, err := ParseCloud("[Global \"east\"]\ncinder-endpoint=http://e/v3\ntenant-id=1\n", "cloud.conf", "", env(nil)); err == nil || !strings.Contains(err.Error(), "--cloud-name") {
		t.Errorf("subsections only, no --cloud-name: %v", err)
	}
	if _, err := ParseCloud("[Global \"east\"]\ncinder-endpont=http://e/v3\n", "cloud.conf", "east", env(nil)); err == nil || !strings.Contains(err.Error(), "cinder-endpont") {
		t.Errorf("unknown key in a subsection: %v", err)
	}
	if _, err := Load("", "east"); err == nil || !strings.Contains(err.Error(), "--cloud-config") {
		t.Errorf("--cloud-name without --cloud-config: %v", err)
	}
}

// TestCloudsYAMLSearchPath: without clouds-file or OS_CLIENT_CONFIG_FILE,
// clouds.yaml is looked for where gophercloud's clouds.Parse looks, the
// user's configuration being ${XDG_CONFIG_HOME:-$HOME/.config}/openstack;
// the error names every place looked at.
func TestCloudsYAMLSearchPath(t *testing.T) {
	xdg := t.TempDir()
	if err := os.MkdirAll(filepath.Join(xdg, "openstack"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(xdg, "openstack", "clouds.yaml"),
		[]byte("clouds:\n  only:\n    auth: {auth_url: \"https://keystone/v3\", token: tok, project_id: p}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := ParseCloud("[Global]\nuse-clouds=true\n", "cloud.conf", "", env(map[string]string{"XDG_CONFIG_HOME": xdg}))
	if err != nil || c.Token != "tok" || !strings.Contains(c.Source, filepath.Join(xdg, "openstack", "clouds.yaml")) {
		t.Fatalf("clouds.yaml under XDG_CONFIG_HOME: %v, %+v", err, c)
	}
	empty := t.TempDir()
	_, err = ParseCloud("[Global]\nuse-clouds=true\n", "cloud.conf", "", env(map[string]string{"XDG_CONFIG_HOME": empty}))
	if err == nil || !strings.Contains(err.Error(), filepath.Join(empty, "openstack", "clouds.yaml")) || !strings.Contains(err.Error(), "/etc/openstack/clouds.yaml") {
		t.Errorf("no clouds.yaml anywhere: %v; want the places looked at", err)
	}
}
