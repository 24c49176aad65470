// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cloudconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"sigs.k8s.io/yaml"
)

// cloudsFileName is what clouds.yaml is called in the places it is looked
// for when clouds-file does not name one.
const cloudsFileName = "clouds.yaml"

// cloudsSearchPath is where clouds.yaml is looked for, in order, after
// OS_CLIENT_CONFIG_FILE, as gophercloud's clouds.Parse documents it (the
// python-openstackclient order): the working directory, the user's
// configuration (${XDG_CONFIG_HOME:-$HOME/.config}/openstack) and
// /etc/openstack. clouds.Parse does not say which file it read, which the
// secure.yaml check and our messages need, so the search is done here.
func cloudsSearchPath(lookup func(string) (string, bool)) []string {
	path := []string{cloudsFileName}
	if config, _ := lookup("XDG_CONFIG_HOME"); config != "" {
		path = append(path, filepath.Join(config, "openstack", cloudsFileName))
	} else if home, err := os.UserHomeDir(); err == nil {
		path = append(path, filepath.Join(home, ".config", "openstack", cloudsFileName))
	}
	return append(path, filepath.Join("/etc", "openstack", cloudsFileName))
}

// cloudsYAML is the part of clouds.yaml that is read; each entry is decoded
// strictly into gophercloud's clouds.Cloud only once selected, so that other
// clouds may hold keys of other tools.
type cloudsYAML struct {
	Clouds map[string]json.RawMessage `json:"clouds"`
}

// fillFromClouds reads the cloud named name (else OS_CLOUD, else the only
// one) from clouds.yaml at file (else OS_CLIENT_CONFIG_FILE, else the search
// path) and sets every field of c that is still empty, as the OpenStack
// cloud provider's use-clouds does: [Global] wins. insecureSet says whether
// tls-insecure was given, which then wins over verify.
func (c *Config) fillFromClouds(file, name string, lookup func(string) (string, bool), insecureSet bool) error {
	path, name, e, err := readCloud(file, name, lookup)
	if err != nil {
		return err
	}
	a := e.AuthInfo
	endpointType := e.Interface
	if endpointType == "" {
		endpointType = e.EndpointType
	} else if e.EndpointType != "" && e.EndpointType != e.Interface {
		return fmt.Errorf("%s, cloud %q: interface and endpoint_type are both set, to different values; set one", path, name)
	}
	for _, f := range []struct {
		dst *string
		v   string
	}{
		{&c.AuthURL, a.AuthURL}, {&c.Token, a.Token}, {&c.Username, a.Username}, {&c.UserID, a.UserID}, {&c.Password, a.Password},
		{&c.ApplicationCredentialID, a.ApplicationCredentialID}, {&c.ApplicationCredentialName, a.ApplicationCredentialName},
		{&c.ApplicationCredentialSecret, a.ApplicationCredentialSecret},
		{&c.TenantID, a.ProjectID}, {&c.TenantName, a.ProjectName},
		{&c.UserDomainID, a.UserDomainID}, {&c.UserDomainName, a.UserDomainName},
		{&c.ProjectDomainID, a.ProjectDomainID}, {&c.ProjectDomainName, a.ProjectDomainName},
		{&c.DomainID, a.DomainID}, {&c.DomainName, a.DomainName}, {&c.TrustID, a.TrustID},
		{&c.Region, e.RegionName}, {&c.EndpointType, endpointType},
		{&c.CAFile, e.CACertFile}, {&c.CertFile, e.ClientCertFile}, {&c.KeyFile, e.ClientKeyFile},
	} {
		if *f.dst == "" {
			*f.dst = f.v
		}
	}
	// default_domain: the domain of a user or project given without one.
	if a.DefaultDomain != "" && c.DomainID == "" && c.DomainName == "" {
		c.DomainID = a.DefaultDomain
	}
	if e.Verify != nil && !insecureSet {
		c.TLSInsecure = !*e.Verify
	}
	c.Source += fmt.Sprintf(" and %s (cloud %q)", path, name)
	return nil
}

// readCloud finds clouds.yaml, refuses a secure.yaml beside it, and returns
// the file's path, the selected cloud's name and its entry, checked.
func readCloud(file, name string, lookup func(string) (string, bool)) (string, string, *clouds.Cloud, error) {
	path, content, err := findClouds(file, lookup)
	if err != nil {
		return "", "", nil, err
	}
	if err := refuseSecureYAML(path, lookup); err != nil {
		return "", "", nil, err
	}
	var all cloudsYAML
	if err := yaml.Unmarshal(content, &all); err != nil {
		return "", "", nil, fmt.Errorf("%s: %w", path, err)
	}
	name, raw, err := selectCloud(path, name, all.Clouds, lookup)
	if err != nil {
		return "", "", nil, err
	}
	// gophercloud's schema, decoded strictly: a key it does not know is a
	// typo or another tool's, and is refused rather than ignored.
	var e clouds.Cloud
	if err := yaml.UnmarshalStrict(raw, &e); err != nil {
		// Key names only: the decoder quotes no values.
		return "", "", nil, fmt.Errorf("%s, cloud %q: %w", path, name, err)
	}
	if e.AuthInfo == nil {
		e.AuthInfo = &clouds.AuthInfo{}
	}
	if err := check(&e); err != nil {
		return "", "", nil, fmt.Errorf("%s, cloud %q: %w", path, name, err)
	}
	return path, name, &e, nil
}

// selectCloud picks the entry of the cloud named name, else OS_CLOUD, else
// the only one in the file at path.
func selectCloud(path, name string, all map[string]json.RawMessage, lookup func(string) (string, bool)) (string, json.RawMessage, error) {
	if name == "" {
		name, _ = lookup("OS_CLOUD")
	}
	names := slices.Sorted(maps.Keys(all))
	switch {
	case name == "" && len(names) == 1:
		name = names[0]
	case name == "":
		return "", nil, fmt.Errorf("%s has clouds %s: select one with cloud (or OS_CLOUD)", path, strings.Join(names, ", "))
	}
	raw, ok := all[name]
	if !ok {
		return "", nil, fmt.Errorf("%s has no cloud %q; it has %s", path, name, strings.Join(names, ", "))
	}
	return name, raw, nil
}

// check refuses what clouds.yaml may say that has no meaning here, naming
// what to use instead.
func check(e *clouds.Cloud) error {
	var errs []error
	switch clouds.AuthType(strings.ToLower(string(e.AuthType))) {
	case "", clouds.AuthPassword, clouds.AuthV3Password, clouds.AuthToken, clouds.AuthV3Token,
		clouds.AuthV3ApplicationCredential, "applicationcredential":
	default:
		errs = append(errs, fmt.Errorf("auth_type %q is not supported: use password, token or v3applicationcredential", e.AuthType))
	}
	if len(e.Regions) > 0 {
		errs = append(errs, errors.New("regions is not supported: set region_name (one provisioner serves one region)"))
	}
	if e.Profile != "" || e.Cloud != "" {
		errs = append(errs, errors.New("profile and cloud (clouds-public.yaml) are not read: write auth_url and the other keys into the cloud's entry"))
	}
	if e.AuthInfo.SystemScope != "" {
		errs = append(errs, errors.New("system_scope is not supported: volumes belong to a project; set project_id or project_name"))
	}
	if v := e.VolumeAPIVersion; v != "" && v != "3" {
		errs = append(errs, fmt.Errorf("volume_api_version %s is not supported: this provisioner speaks block storage v3", v))
	}
	// identity_api_version: as in gophercloud, auth_url decides (.../v3 or .../v2.0).
	return errors.Join(errs...)
}

// findClouds returns the path and content of clouds.yaml: file if given,
// else OS_CLIENT_CONFIG_FILE, else the first of cloudsSearchPath that exists.
func findClouds(file string, lookup func(string) (string, bool)) (string, []byte, error) {
	if file == "" {
		file, _ = lookup("OS_CLIENT_CONFIG_FILE")
	}
	if file != "" {
		b, err := os.ReadFile(file) //nolint:gosec // G304: the administrator's clouds-file
		return file, b, err
	}
	for _, p := range cloudsSearchPath(lookup) {
		b, err := os.ReadFile(p) //nolint:gosec // G304: clouds.yaml's standard places
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		return p, b, err
	}
	return "", nil, fmt.Errorf("no clouds.yaml: set clouds-file, or put one at %s", strings.Join(cloudsSearchPath(lookup), ", "))
}

// refuseSecureYAML refuses a secure.yaml beside clouds.yaml (or named by
// OS_CLIENT_SECURE_FILE): other OpenStack clients merge it, this one does
// not, and silently missing its secrets would log in as someone else.
func refuseSecureYAML(cloudsPath string, lookup func(string) (string, bool)) error {
	secure, ok := lookup("OS_CLIENT_SECURE_FILE")
	if !ok || secure == "" {
		secure = filepath.Join(filepath.Dir(cloudsPath), "secure.yaml")
	}
	if _, err := os.Stat(secure); err == nil {
		return fmt.Errorf("%s is not read: move its keys into %s (a Secret) or into [Global]", secure, cloudsPath)
	}
	return nil
}
