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
	"strconv"
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

// Config is the validated way to reach Cinder. Every field that holds a
// credential is tagged `secret:"true"`: no error, log line or event may
// carry its value (see Redact).
type Config struct {
	Mode AuthMode

	// Keystone. AuthURL is the identity endpoint (versioned or not).
	AuthURL    string
	Username   string
	UserID     string
	Password   string `secret:"true"`
	TenantID   string
	TenantName string
	// DomainID or DomainName is the domain of the user and of a project
	// given by name, unless UserDomain* or ProjectDomain* say otherwise
	// (see userDomain); DomainID is DefaultDomainID when no domain is set.
	DomainID          string
	DomainName        string
	UserDomainID      string
	UserDomainName    string
	ProjectDomainID   string
	ProjectDomainName string
	// Application credentials (by id, or by name with the user) replace
	// the password; the credential carries its own project.
	ApplicationCredentialID     string
	ApplicationCredentialName   string
	ApplicationCredentialSecret string `secret:"true"`
	// TrustID scopes the token to a trust instead of a project; TrusteeID
	// and TrusteePassword, when set, replace UserID and Password for it.
	TrustID         string
	TrusteeID       string
	TrusteePassword string `secret:"true"`
	// Token is a Keystone token to log in with instead of a password; it
	// cannot be renewed, so the provisioner stops working when it expires.
	Token  string `secret:"true"`
	Region string
	// EndpointType is the catalog interface: public (default), internal or admin.
	EndpointType string

	// CinderEndpoint is the block storage endpoint for noauth, for example
	// http://cinder:8776/v3; the project (TenantID or TenantName) is appended.
	CinderEndpoint string

	// CAFile is a PEM bundle trusted for https endpoints besides the system
	// roots; empty means the system roots only.
	CAFile string
	// TLSInsecure skips verification of the servers' certificates.
	TLSInsecure bool
	// CertFile and KeyFile are a client certificate for TLS.
	CertFile string
	KeyFile  string

	// Source says where the configuration came from, for messages.
	Source string
}

// String describes the configuration without its password or secret.
func (c *Config) String() string {
	switch c.Mode {
	case AuthNoAuth:
		return fmt.Sprintf("noauth Cinder at %s, project %q (from %s)", c.CinderEndpoint, c.Project(), c.Source)
	default:
		if c.ApplicationCredential() {
			cred := c.ApplicationCredentialID
			if cred == "" {
				cred = c.ApplicationCredentialName
			}
			return fmt.Sprintf("Keystone at %s with application credential %s, region %q (from %s)", c.AuthURL, cred, c.Region, c.Source)
		}
		user := c.Username
		if user == "" {
			user = "id " + c.UserID
		}
		if c.Token != "" {
			user = "a token"
		}
		scope := fmt.Sprintf("project %q", c.Project())
		if c.TrustID != "" {
			scope = fmt.Sprintf("trust %q", c.TrustID)
		}
		return fmt.Sprintf("Keystone at %s as user %s, %s, region %q (from %s)", c.AuthURL, user, scope, c.Region, c.Source)
	}
}

// Project is the project (tenant) id, or else its name.
func (c *Config) Project() string {
	if c.TenantID != "" {
		return c.TenantID
	}
	return c.TenantName
}

// ApplicationCredential reports whether c logs in with an application
// credential rather than a password.
func (c *Config) ApplicationCredential() bool {
	return c.ApplicationCredentialID != "" || c.ApplicationCredentialName != ""
}

// wire is the file as written: every [Global] section (plain, or
// [Global "name"] subsections, one per cloud, as in cinder-csi-plugin's
// cloud config), each key known, nothing checked yet.
type wire struct {
	Global map[string]*global
}

// global is one [Global] section. The keys are the OpenStack cloud
// provider's (pkg/client AuthOpts), plus project-* aliases of tenant-* and
// this provisioner's cinder-endpoint.
type global struct {
	AuthURL                     string `gcfg:"auth-url"`
	Username                    string `gcfg:"username"`
	UserID                      string `gcfg:"user-id"`
	Password                    string `gcfg:"password"`
	TenantID                    string `gcfg:"tenant-id"`
	TenantName                  string `gcfg:"tenant-name"`
	ProjectID                   string `gcfg:"project-id"`
	ProjectName                 string `gcfg:"project-name"`
	DomainID                    string `gcfg:"domain-id"`
	DomainName                  string `gcfg:"domain-name"`
	TenantDomainID              string `gcfg:"tenant-domain-id"`
	TenantDomainName            string `gcfg:"tenant-domain-name"`
	ProjectDomainID             string `gcfg:"project-domain-id"`
	ProjectDomainName           string `gcfg:"project-domain-name"`
	UserDomainID                string `gcfg:"user-domain-id"`
	UserDomainName              string `gcfg:"user-domain-name"`
	ApplicationCredentialID     string `gcfg:"application-credential-id"`
	ApplicationCredentialName   string `gcfg:"application-credential-name"`
	ApplicationCredentialSecret string `gcfg:"application-credential-secret"`
	TrustID                     string `gcfg:"trust-id"`
	TrusteeID                   string `gcfg:"trustee-id"`
	TrusteePassword             string `gcfg:"trustee-password"`
	Token                       string `gcfg:"token"`
	Region                      string `gcfg:"region"`
	EndpointType                string `gcfg:"os-endpoint-type"`
	CAFile                      string `gcfg:"ca-file"`
	TLSInsecure                 string `gcfg:"tls-insecure"`
	CertFile                    string `gcfg:"cert-file"`
	KeyFile                     string `gcfg:"key-file"`
	CinderEndpoint              string `gcfg:"cinder-endpoint"`
	// clouds.yaml: fills what the section leaves empty (see clouds.go).
	UseClouds  string `gcfg:"use-clouds"`
	CloudsFile string `gcfg:"clouds-file"`
	Cloud      string `gcfg:"cloud"`
}

// globalKeys lists the keys of [Global], for the unknown-key message.
var globalKeys = []string{"auth-url", "username", "user-id", "password", "tenant-id", "tenant-name", "project-id", "project-name",
	"domain-id", "domain-name", "tenant-domain-id", "tenant-domain-name", "project-domain-id", "project-domain-name",
	"user-domain-id", "user-domain-name", "application-credential-id", "application-credential-name", "application-credential-secret",
	"trust-id", "trustee-id", "trustee-password", "token", "region", "os-endpoint-type", "ca-file", "tls-insecure", "cert-file", "key-file",
	"cinder-endpoint", "use-clouds", "clouds-file", "cloud"}

// Load reads the cloud config file at path, its [Global "cloudName"]
// section ([Global] for ""), or the environment when path is empty.
func Load(path, cloudName string) (*Config, error) {
	if path == "" {
		if cloudName != "" {
			return nil, errors.New("--cloud-name selects a [Global \"name\"] section of --cloud-config, which is not given")
		}
		return FromEnv(os.LookupEnv)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--cloud-config: %w", err)
	}
	return ParseCloud(string(b), path, cloudName, os.LookupEnv)
}

// Parse reads a cloud config file's [Global] section; see ParseCloud.
func Parse(content, name string) (*Config, error) {
	return ParseCloud(content, name, "", os.LookupEnv)
}

// ParseCloud reads a cloud config file's content; name says where it came
// from. It reads the section [Global "cloudName"], or [Global] when
// cloudName is "": each such subsection is another cloud, as in
// cinder-csi-plugin's --cloud-name. Sections other than [Global] belong to
// other OpenStack components sharing the file (the cloud provider's
// [BlockStorage], [LoadBalancer], ...) and are ignored; an unknown key in
// [Global] is an error naming it. With use-clouds, clouds.yaml fills what
// the section leaves empty; lookup reads OS_CLOUD and
// OS_CLIENT_CONFIG_FILE for it.
func ParseCloud(content, name, cloudName string, lookup func(string) (string, bool)) (*Config, error) {
	w, err := readWire(content, name)
	if err != nil {
		return nil, err
	}
	from := "cloud config " + name
	g, err := w.section(from, cloudName)
	if err != nil {
		return nil, err
	}
	if cloudName != "" {
		from += fmt.Sprintf(` [Global %q]`, cloudName)
	}
	c, useClouds, err := g.config(from)
	if err != nil {
		return nil, err
	}
	if useClouds {
		if err := c.fillFromClouds(g.CloudsFile, g.Cloud, lookup, g.TLSInsecure != ""); err != nil {
			return nil, fmt.Errorf("%s: use-clouds: %w", from, err)
		}
	}
	return validate(c, fileKeys)
}

// readWire reads a cloud config file into its wire form. gcfg only warns of
// a key it cannot store; here an unknown key in [Global] is an error naming
// it, since it is a typo or a key of another version.
func readWire(content, name string) (*wire, error) {
	var w wire
	err := gcfg.ReadStringInto(&w, content)
	var list warnings.List
	if !errors.As(err, &list) {
		if err != nil {
			return nil, fmt.Errorf("cloud config %s: %w", name, err)
		}
		return &w, nil
	}
	if list.Fatal != nil {
		return nil, fmt.Errorf("cloud config %s: %w", name, list.Fatal)
	}
	if unknown := unknownGlobalKeys(list.Warnings); len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("cloud config %s: unknown key(s) %s in [Global]; known keys are %s",
			name, strings.Join(unknown, ", "), strings.Join(globalKeys, ", "))
	}
	return &w, nil
}

// unknownGlobalKeys returns the [Global] keys gcfg warned it could not
// store.
func unknownGlobalKeys(warns []error) []string {
	var unknown []string
	for _, warn := range warns {
		// gcfg reports data it cannot store as `can't store data at
		// section "x", variable "y"`; without a variable it is a whole
		// section we do not read.
		loc := warn.Error()
		if _, v, ok := strings.Cut(loc, `variable "`); ok && strings.Contains(strings.ToLower(loc), `section "global"`) {
			unknown = append(unknown, strings.TrimSuffix(v, `"`))
		}
	}
	return unknown
}

// config turns the section into a Config, not validated yet, and says
// whether clouds.yaml is to fill it (use-clouds). Every problem of the
// section is reported at once.
func (g *global) config(from string) (*Config, bool, error) {
	e := &sourceErrors{from: from}
	c := &Config{
		AuthURL:                     g.AuthURL,
		Username:                    g.Username,
		UserID:                      g.UserID,
		Password:                    g.Password,
		TenantID:                    e.alias("tenant-id", g.TenantID, "project-id", g.ProjectID),
		TenantName:                  e.alias("tenant-name", g.TenantName, "project-name", g.ProjectName),
		DomainID:                    g.DomainID,
		DomainName:                  g.DomainName,
		ProjectDomainID:             e.alias("tenant-domain-id", g.TenantDomainID, "project-domain-id", g.ProjectDomainID),
		ProjectDomainName:           e.alias("tenant-domain-name", g.TenantDomainName, "project-domain-name", g.ProjectDomainName),
		UserDomainID:                g.UserDomainID,
		UserDomainName:              g.UserDomainName,
		ApplicationCredentialID:     g.ApplicationCredentialID,
		ApplicationCredentialName:   g.ApplicationCredentialName,
		ApplicationCredentialSecret: g.ApplicationCredentialSecret,
		TrustID:                     g.TrustID,
		TrusteeID:                   g.TrusteeID,
		TrusteePassword:             g.TrusteePassword,
		Token:                       g.Token,
		Region:                      g.Region,
		EndpointType:                g.EndpointType,
		CAFile:                      g.CAFile,
		CertFile:                    g.CertFile,
		KeyFile:                     g.KeyFile,
		CinderEndpoint:              g.CinderEndpoint,
		Source:                      from,
	}
	c.TLSInsecure = e.boolean("tls-insecure", g.TLSInsecure)
	useClouds := e.boolean("use-clouds", g.UseClouds)
	if !useClouds && (g.CloudsFile != "" || g.Cloud != "") {
		e.errs = append(e.errs, fmt.Errorf("%s: clouds-file and cloud are read only with use-clouds = true; set it, or remove them", from))
	}
	if err := errors.Join(e.errs...); err != nil {
		return nil, false, err
	}
	return c, useClouds, nil
}

// sourceErrors reads the values of one source (a file's section, the
// environment) that need more than copying, collecting their problems, each
// prefixed with where the source is, so that one error names them all.
type sourceErrors struct {
	from string
	errs []error
}

// alias returns the value of a key and of its alias; set to different
// values is an error, since either could be the intended one.
func (e *sourceErrors) alias(k1, v1, k2, v2 string) string {
	if v1 != "" && v2 != "" && v1 != v2 {
		e.errs = append(e.errs, fmt.Errorf("%s: %s and %s are both set, to different values; set one", e.from, k1, k2))
	}
	if v1 != "" {
		return v1
	}
	return v2
}

// boolean reads a true/false key; unset is false.
func (e *sourceErrors) boolean(key, v string) bool {
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s: %s: %q is not true or false", e.from, key, v))
	}
	return b
}

// section returns the [Global "cloudName"] section, or [Global] for "".
func (w *wire) section(from, cloudName string) (*global, error) {
	if g := w.Global[cloudName]; g != nil {
		return g, nil
	}
	var have []string
	for n := range w.Global {
		if n == "" {
			have = append(have, "[Global]")
		} else {
			have = append(have, fmt.Sprintf("[Global %q]", n))
		}
	}
	sort.Strings(have)
	switch {
	case cloudName == "" && len(have) == 0:
		return &global{}, nil // validate names what is missing
	case cloudName == "":
		return nil, fmt.Errorf("%s has no [Global] section, only %s: select one with --cloud-name", from, strings.Join(have, ", "))
	case len(have) == 0:
		return nil, fmt.Errorf("%s has no [Global %q] section (--cloud-name) and no [Global] section at all", from, cloudName)
	default:
		return nil, fmt.Errorf("%s has no [Global %q] section (--cloud-name); it has %s", from, cloudName, strings.Join(have, ", "))
	}
}

// keyNames names each setting the way its source spells it, so that errors
// point at what the user wrote.
type keyNames struct {
	authURL, username, userID, password, tenantID, tenantName, domain, userDomain, projectDomain string
	appCredID, appCredName, appCredSecret, trustID, trusteeID, trusteePassword, token            string
	endpointType, caFile, certFile, keyFile, cinderEndpoint                                      string
}

var fileKeys = keyNames{
	authURL: "auth-url", username: "username", userID: "user-id", password: "password",
	tenantID: "tenant-id", tenantName: "tenant-name", domain: "domain-id or domain-name",
	userDomain: "user-domain-id or user-domain-name", projectDomain: "tenant-domain-id or tenant-domain-name",
	appCredID: "application-credential-id", appCredName: "application-credential-name", appCredSecret: "application-credential-secret",
	trustID: "trust-id", trusteeID: "trustee-id", trusteePassword: "trustee-password", token: "token",
	endpointType: "os-endpoint-type", caFile: "ca-file", certFile: "cert-file", keyFile: "key-file", cinderEndpoint: "cinder-endpoint",
}

var envKeys = keyNames{ //nolint:gosec // names of environment variables, not credentials
	authURL: "OS_AUTH_URL", username: "OS_USERNAME", userID: "OS_USER_ID", password: "OS_PASSWORD",
	tenantID: "OS_TENANT_ID (or OS_PROJECT_ID)", tenantName: "OS_TENANT_NAME (or OS_PROJECT_NAME)",
	domain:     "OS_DOMAIN_ID or OS_DOMAIN_NAME",
	userDomain: "OS_USER_DOMAIN_ID or OS_USER_DOMAIN_NAME", projectDomain: "OS_PROJECT_DOMAIN_ID or OS_PROJECT_DOMAIN_NAME",
	appCredID: "OS_APPLICATION_CREDENTIAL_ID", appCredName: "OS_APPLICATION_CREDENTIAL_NAME", appCredSecret: "OS_APPLICATION_CREDENTIAL_SECRET",
	trustID: "OS_TRUST_ID", trusteeID: "OS_TRUSTEE_ID", trusteePassword: "OS_TRUSTEE_PASSWORD", token: "OS_TOKEN (or OS_AUTH_TOKEN)",
	endpointType: "OS_INTERFACE (or OS_ENDPOINT_TYPE)", caFile: "OS_CACERT", certFile: "OS_CERT", keyFile: "OS_KEY",
	cinderEndpoint: "OS_CINDER_ENDPOINT",
}

// EnvVars lists the environment variables FromEnv reads.
var EnvVars = []string{"OS_AUTH_URL", "OS_USERNAME", "OS_USER_ID", "OS_PASSWORD", "OS_TENANT_ID", "OS_PROJECT_ID",
	"OS_TENANT_NAME", "OS_PROJECT_NAME", "OS_DOMAIN_ID", "OS_DOMAIN_NAME", "OS_USER_DOMAIN_ID", "OS_USER_DOMAIN_NAME",
	"OS_PROJECT_DOMAIN_ID", "OS_PROJECT_DOMAIN_NAME", "OS_APPLICATION_CREDENTIAL_ID", "OS_APPLICATION_CREDENTIAL_NAME",
	"OS_APPLICATION_CREDENTIAL_SECRET", "OS_TRUST_ID", "OS_TRUSTEE_ID", "OS_TRUSTEE_PASSWORD", "OS_TOKEN", "OS_AUTH_TOKEN", "OS_REGION_NAME",
	"OS_INTERFACE", "OS_ENDPOINT_TYPE", "OS_CACERT", "OS_INSECURE", "OS_CERT", "OS_KEY", "OS_CINDER_ENDPOINT"}

// FromEnv reads the OS_* variables through lookup (os.LookupEnv).
func FromEnv(lookup func(string) (string, bool)) (*Config, error) {
	e := &sourceErrors{from: "environment"}
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
				e.errs = append(e.errs, fmt.Errorf("environment: %s and %s are both set, to different values; set one", from, n))
				continue
			}
			if from == "" {
				val, from = v, n
			}
		}
		return val
	}
	c := &Config{
		AuthURL:                     first("OS_AUTH_URL"),
		Username:                    first("OS_USERNAME"),
		UserID:                      first("OS_USER_ID"),
		Password:                    first("OS_PASSWORD"),
		TenantID:                    first("OS_TENANT_ID", "OS_PROJECT_ID"),
		TenantName:                  first("OS_TENANT_NAME", "OS_PROJECT_NAME"),
		DomainID:                    first("OS_DOMAIN_ID"),
		DomainName:                  first("OS_DOMAIN_NAME"),
		UserDomainID:                first("OS_USER_DOMAIN_ID"),
		UserDomainName:              first("OS_USER_DOMAIN_NAME"),
		ProjectDomainID:             first("OS_PROJECT_DOMAIN_ID"),
		ProjectDomainName:           first("OS_PROJECT_DOMAIN_NAME"),
		ApplicationCredentialID:     first("OS_APPLICATION_CREDENTIAL_ID"),
		ApplicationCredentialName:   first("OS_APPLICATION_CREDENTIAL_NAME"),
		ApplicationCredentialSecret: first("OS_APPLICATION_CREDENTIAL_SECRET"),
		TrustID:                     first("OS_TRUST_ID"),
		TrusteeID:                   first("OS_TRUSTEE_ID"),
		TrusteePassword:             first("OS_TRUSTEE_PASSWORD"),
		Token:                       first("OS_TOKEN", "OS_AUTH_TOKEN"),
		Region:                      first("OS_REGION_NAME"),
		EndpointType:                first("OS_INTERFACE", "OS_ENDPOINT_TYPE"),
		CAFile:                      first("OS_CACERT"),
		CertFile:                    first("OS_CERT"),
		KeyFile:                     first("OS_KEY"),
		CinderEndpoint:              first("OS_CINDER_ENDPOINT"),
		Source:                      "environment",
	}
	c.TLSInsecure = e.boolean("OS_INSECURE", first("OS_INSECURE"))
	if err := errors.Join(e.errs...); err != nil {
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
	p := &problems{from: c.Source}
	switch {
	case c.CinderEndpoint != "" && c.AuthURL != "":
		p.add("both %s (Keystone) and %s (noauth) are set; set one", k.authURL, k.cinderEndpoint)
	case c.CinderEndpoint != "":
		validateNoAuth(c, k, p)
	case c.AuthURL != "":
		validateKeystone(c, k, p)
	default:
		p.add("set %s (Keystone) or %s (noauth)", k.authURL, k.cinderEndpoint)
	}
	validateTLSFiles(c, k, p)
	if err := errors.Join(p.errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// problems collects what is wrong with a configuration, each prefixed with
// where it came from, so that one error names every problem at once.
type problems struct {
	from string
	errs []error
}

func (p *problems) add(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s: "+format, append([]any{p.from}, args...)...))
}

func validateNoAuth(c *Config, k keyNames, p *problems) {
	c.Mode = AuthNoAuth
	if err := checkURL(c.CinderEndpoint); err != nil {
		p.add("%s: %v", k.cinderEndpoint, err)
	}
	if c.Project() == "" {
		p.add("noauth needs %s or %s: Cinder puts the project in every URL", k.tenantID, k.tenantName)
	}
}

func validateKeystone(c *Config, k keyNames, p *problems) {
	c.Mode = AuthKeystone
	if err := checkURL(c.AuthURL); err != nil {
		p.add("%s: %v", k.authURL, err)
	}
	switch {
	case c.Token != "":
		// The token is the login: Keystone rescopes it to the project or
		// trust when one is given, and keeps its own scope otherwise.
		if c.Username != "" || c.UserID != "" || c.Password != "" || c.ApplicationCredential() || c.TrusteeID != "" || c.TrusteePassword != "" {
			p.add("%s replaces %s, %s, %s and the application credential keys; set one way to log in", k.token, k.username, k.userID, k.password)
		}
	case c.ApplicationCredential():
		validateApplicationCredential(c, k, p)
	default:
		validatePasswordLogin(c, k, p)
	}
	validateDomains(c, k, p)
	switch c.EndpointType {
	case "", "public", "internal", "admin":
	case "publicURL", "internalURL", "adminURL":
		c.EndpointType = strings.TrimSuffix(c.EndpointType, "URL")
	default:
		p.add("%s: %q is not public, internal or admin", k.endpointType, c.EndpointType)
	}
}

// validateApplicationCredential: the credential carries its project: no
// scope, no password.
func validateApplicationCredential(c *Config, k keyNames, p *problems) {
	if c.ApplicationCredentialSecret == "" {
		p.add("an application credential needs %s", k.appCredSecret)
	}
	if c.ApplicationCredentialID == "" && c.Username == "" && c.UserID == "" {
		p.add("%s needs %s or %s (or use %s)", k.appCredName, k.username, k.userID, k.appCredID)
	}
	if c.TrustID != "" {
		p.add("%s cannot be used with an application credential, which carries its own scope", k.trustID)
	}
}

func validatePasswordLogin(c *Config, k keyNames, p *problems) {
	if c.ApplicationCredentialSecret != "" {
		p.add("%s is set without %s or %s", k.appCredSecret, k.appCredID, k.appCredName)
	}
	if c.Username == "" && c.UserID == "" && c.TrusteeID == "" {
		p.add("Keystone needs %s or %s, or %s", k.username, k.userID, k.appCredID)
	}
	if c.Password == "" && c.TrusteePassword == "" {
		p.add("Keystone needs %s (or an application credential)", k.password)
	}
	if c.Project() == "" && c.TrustID == "" {
		p.add("Keystone needs %s, %s or %s: the token must be scoped to the project that owns the volumes", k.tenantID, k.tenantName, k.trustID)
	}
	if c.TrustID == "" && (c.TrusteeID != "" || c.TrusteePassword != "") {
		p.add("%s and %s are used only with %s", k.trusteeID, k.trusteePassword, k.trustID)
	}
}

// validateDomains: one of id and name per domain; none at all means the
// default domain.
func validateDomains(c *Config, k keyNames, p *problems) {
	for _, d := range []struct{ id, name, keys string }{
		{c.DomainID, c.DomainName, k.domain}, {c.UserDomainID, c.UserDomainName, k.userDomain}, {c.ProjectDomainID, c.ProjectDomainName, k.projectDomain},
	} {
		if d.id != "" && d.name != "" {
			p.add("set one of %s, not both", d.keys)
		}
	}
	if c.DomainID == "" && c.DomainName == "" && c.UserDomainID == "" && c.UserDomainName == "" && c.ProjectDomainID == "" && c.ProjectDomainName == "" {
		c.DomainID = DefaultDomainID
	}
}

func validateTLSFiles(c *Config, k keyNames, p *problems) {
	for _, f := range []struct{ path, key string }{{c.CAFile, k.caFile}, {c.CertFile, k.certFile}, {c.KeyFile, k.keyFile}} {
		if f.path != "" {
			if _, err := os.Stat(f.path); err != nil {
				p.add("%s: %v", f.key, err)
			}
		}
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		p.add("a client certificate needs both %s and %s", k.certFile, k.keyFile)
	}
}

// userDomain and projectDomain are the domains Keystone gets: the specific
// keys, or else domain-id/domain-name, or else the other one's specific
// keys (a user and a project in the same domain is the common case, and
// what one OS_USER_DOMAIN_NAME used to mean here), or else DefaultDomainID.
func (c *Config) userDomain() (id, name string) {
	return firstDomain(c.UserDomainID, c.UserDomainName, c.DomainID, c.DomainName, c.ProjectDomainID, c.ProjectDomainName)
}

func (c *Config) projectDomain() (id, name string) {
	return firstDomain(c.ProjectDomainID, c.ProjectDomainName, c.DomainID, c.DomainName, c.UserDomainID, c.UserDomainName)
}

// firstDomain returns the first (id, name) pair of which one is set.
func firstDomain(pairs ...string) (id, name string) {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i] != "" || pairs[i+1] != "" {
			return pairs[i], pairs[i+1]
		}
	}
	return DefaultDomainID, ""
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
