// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cloudconfig reads how to reach Cinder: an INI cloud config file
// (the [Global] section users of the OpenStack cloud provider know) or the
// OS_* environment variables, validated into a Config, and builds the
// gophercloud block storage v3 client from it, through Keystone or, for a
// Cinder that runs without Keystone, noauth.
//
// Reading is two-layer: the file or environment fills a wire struct, which
// is checked (unknown keys rejected by name, required keys named) and turned
// into the runtime Config. Passwords never appear in errors or in String.
package cloudconfig

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"

	"gopkg.in/gcfg.v1"
	"gopkg.in/warnings.v0"
)

// AuthMode says how the provisioner authenticates to Cinder.
type AuthMode string

const (
	// AuthKeystone logs in to Keystone (identity v3, or v2.0 where the URL
	// asks for it) and finds Cinder in the service catalog.
	AuthKeystone AuthMode = "keystone"
	// AuthNoAuth talks to a Cinder configured with auth_strategy noauth (or
	// noauth_include_project_id) at cinder-endpoint.
	AuthNoAuth AuthMode = "noauth"
)

// DefaultDomainID is the Keystone domain used for a username or project
// name given without domain-id or domain-name: Keystone's built-in domain.
const DefaultDomainID = "default"

// Config is the validated way to reach Cinder.
type Config struct {
	Mode AuthMode

	// Keystone. AuthURL is the identity endpoint (versioned or not).
	AuthURL    string
	Username   string
	UserID     string
	Password   string
	TenantID   string
	TenantName string
	// DomainID or DomainName scopes both the user and a project given by
	// name; DomainID defaults to DefaultDomainID when neither is set.
	DomainID   string
	DomainName string
	Region     string
	TrustID    string

	// CinderEndpoint is the block storage endpoint for noauth, for example
	// http://cinder:8776/v3; the project (TenantID or TenantName) is appended.
	CinderEndpoint string

	// CAFile is a PEM bundle trusted for https endpoints besides the system
	// roots; empty means the system roots only.
	CAFile string

	// Source says where the configuration came from, for messages.
	Source string
}

// String describes the configuration without its password.
func (c *Config) String() string {
	switch c.Mode {
	case AuthNoAuth:
		return fmt.Sprintf("noauth Cinder at %s, project %q (from %s)", c.CinderEndpoint, c.Project(), c.Source)
	default:
		user := c.Username
		if user == "" {
			user = "id " + c.UserID
		}
		return fmt.Sprintf("Keystone at %s as user %s, project %q, region %q (from %s)", c.AuthURL, user, c.Project(), c.Region, c.Source)
	}
}

// Project is the project (tenant) id, or else its name.
func (c *Config) Project() string {
	if c.TenantID != "" {
		return c.TenantID
	}
	return c.TenantName
}

// wire is the [Global] section as written in the file: every key is known,
// nothing is checked yet.
type wire struct {
	Global struct {
		AuthURL        string `gcfg:"auth-url"`
		Username       string `gcfg:"username"`
		UserID         string `gcfg:"user-id"`
		Password       string `gcfg:"password"`
		TenantID       string `gcfg:"tenant-id"`
		TenantName     string `gcfg:"tenant-name"`
		DomainID       string `gcfg:"domain-id"`
		DomainName     string `gcfg:"domain-name"`
		Region         string `gcfg:"region"`
		TrustID        string `gcfg:"trust-id"`
		CAFile         string `gcfg:"ca-file"`
		CinderEndpoint string `gcfg:"cinder-endpoint"`
	}
}

// globalKeys lists the keys of [Global], for the unknown-key message.
var globalKeys = []string{"auth-url", "username", "user-id", "password", "tenant-id", "tenant-name",
	"domain-id", "domain-name", "region", "trust-id", "ca-file", "cinder-endpoint"}

// Load reads the cloud config file at path, or the environment when path is
// empty.
func Load(path string) (*Config, error) {
	if path == "" {
		return FromEnv(os.LookupEnv)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--cloud-config: %w", err)
	}
	return Parse(string(b), path)
}

// Parse reads a cloud config file's content; name says where it came from.
// Sections other than [Global] belong to other OpenStack components sharing
// the file (the cloud provider's [BlockStorage], [LoadBalancer], ...) and are
// ignored; an unknown key in [Global] is an error naming it.
func Parse(content, name string) (*Config, error) {
	var w wire
	err := gcfg.ReadStringInto(&w, content)
	var unknown []string
	var list warnings.List
	if errors.As(err, &list) {
		if list.Fatal != nil {
			return nil, fmt.Errorf("cloud config %s: %w", name, list.Fatal)
		}
		for _, warn := range list.Warnings {
			// gcfg reports data it cannot store as `can't store data at
			// section "x", variable "y"`; without a variable it is a whole
			// section we do not read.
			loc := warn.Error()
			if _, v, ok := strings.Cut(loc, `variable "`); ok && strings.Contains(strings.ToLower(loc), `section "global"`) {
				unknown = append(unknown, strings.TrimSuffix(v, `"`))
			}
		}
	} else if err != nil {
		return nil, fmt.Errorf("cloud config %s: %w", name, err)
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("cloud config %s: unknown key(s) %s in [Global]; known keys are %s",
			name, strings.Join(unknown, ", "), strings.Join(globalKeys, ", "))
	}
	g := w.Global
	return validate(&Config{
		AuthURL:        g.AuthURL,
		Username:       g.Username,
		UserID:         g.UserID,
		Password:       g.Password,
		TenantID:       g.TenantID,
		TenantName:     g.TenantName,
		DomainID:       g.DomainID,
		DomainName:     g.DomainName,
		Region:         g.Region,
		TrustID:        g.TrustID,
		CAFile:         g.CAFile,
		CinderEndpoint: g.CinderEndpoint,
		Source:         "cloud config " + name,
	}, fileKeys)
}

// keyNames names each setting the way its source spells it, so that errors
// point at what the user wrote.
type keyNames struct {
	authURL, username, userID, password, tenantID, tenantName, domain, trustID, caFile, cinderEndpoint string
}

var fileKeys = keyNames{
	authURL: "auth-url", username: "username", userID: "user-id", password: "password",
	tenantID: "tenant-id", tenantName: "tenant-name", domain: "domain-id or domain-name",
	trustID: "trust-id", caFile: "ca-file", cinderEndpoint: "cinder-endpoint",
}

var envKeys = keyNames{
	authURL: "OS_AUTH_URL", username: "OS_USERNAME", userID: "OS_USER_ID", password: "OS_PASSWORD",
	tenantID: "OS_TENANT_ID (or OS_PROJECT_ID)", tenantName: "OS_TENANT_NAME (or OS_PROJECT_NAME)",
	domain: "OS_USER_DOMAIN_ID or OS_USER_DOMAIN_NAME", trustID: "OS_TRUST_ID", caFile: "OS_CACERT",
	cinderEndpoint: "OS_CINDER_ENDPOINT",
}

// FromEnv reads the OS_* variables through lookup (os.LookupEnv).
func FromEnv(lookup func(string) (string, bool)) (*Config, error) {
	var errs []error
	// first returns the value of the first variable set; two set to
	// different values is an error, since either could be the intended one.
	first := func(names ...string) string {
		var val, from string
		for _, n := range names {
			v, ok := lookup(n)
			if !ok || v == "" {
				continue
			}
			if from != "" && v != val {
				errs = append(errs, fmt.Errorf("environment: %s and %s are both set, to different values; set one", from, n))
				continue
			}
			if from == "" {
				val, from = v, n
			}
		}
		return val
	}
	c := &Config{
		AuthURL:        first("OS_AUTH_URL"),
		Username:       first("OS_USERNAME"),
		UserID:         first("OS_USER_ID"),
		Password:       first("OS_PASSWORD"),
		TenantID:       first("OS_TENANT_ID", "OS_PROJECT_ID"),
		TenantName:     first("OS_TENANT_NAME", "OS_PROJECT_NAME"),
		DomainID:       first("OS_USER_DOMAIN_ID", "OS_DOMAIN_ID"),
		DomainName:     first("OS_USER_DOMAIN_NAME", "OS_DOMAIN_NAME"),
		Region:         first("OS_REGION_NAME"),
		TrustID:        first("OS_TRUST_ID"),
		CAFile:         first("OS_CACERT"),
		CinderEndpoint: first("OS_CINDER_ENDPOINT"),
		Source:         "environment",
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if c.AuthURL == "" && c.CinderEndpoint == "" {
		return nil, errors.New("no Cinder configuration: pass --cloud-config, or set OS_AUTH_URL (Keystone) or OS_CINDER_ENDPOINT (noauth) and the other OS_* variables")
	}
	return validate(c, envKeys)
}

// validate checks c, naming the keys at fault as k spells them, picks the
// mode and fills defaults.
func validate(c *Config, k keyNames) (*Config, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	from := c.Source
	switch {
	case c.CinderEndpoint != "" && c.AuthURL != "":
		bad("%s: both %s (Keystone) and %s (noauth) are set; set one", from, k.authURL, k.cinderEndpoint)
	case c.CinderEndpoint != "":
		c.Mode = AuthNoAuth
		if err := checkURL(c.CinderEndpoint); err != nil {
			bad("%s: %s: %v", from, k.cinderEndpoint, err)
		}
		if c.Project() == "" {
			bad("%s: noauth needs %s or %s: Cinder puts the project in every URL", from, k.tenantID, k.tenantName)
		}
	case c.AuthURL != "":
		c.Mode = AuthKeystone
		if err := checkURL(c.AuthURL); err != nil {
			bad("%s: %s: %v", from, k.authURL, err)
		}
		if c.Username == "" && c.UserID == "" {
			bad("%s: Keystone needs %s or %s", from, k.username, k.userID)
		}
		if c.Password == "" {
			bad("%s: Keystone needs %s", from, k.password)
		}
		if c.Project() == "" && c.TrustID == "" {
			bad("%s: Keystone needs %s, %s or %s: the token must be scoped to the project that owns the volumes", from, k.tenantID, k.tenantName, k.trustID)
		}
		if c.DomainID != "" && c.DomainName != "" {
			bad("%s: set one of %s, not both", from, k.domain)
		}
		if c.DomainID == "" && c.DomainName == "" {
			c.DomainID = DefaultDomainID
		}
	default:
		bad("%s: set %s (Keystone) or %s (noauth)", from, k.authURL, k.cinderEndpoint)
	}
	if c.CAFile != "" {
		if _, err := os.Stat(c.CAFile); err != nil {
			bad("%s: %s: %v", from, k.caFile, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's error quotes the input, which could hold credentials.
		return errors.New("not a valid URL")
	}
	// Before anything quotes the URL: its user info may hold a password.
	if u.User != nil {
		return errors.New("credentials in the URL are not supported; use the username and password keys")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", raw)
	}
	return nil
}
