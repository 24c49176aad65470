// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cloudconfig

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/noauth"
)

// DefaultHTTPTimeout bounds each HTTP request to Keystone or Cinder, so that
// a hung endpoint cannot hold a worker past its operation timeout.
const DefaultHTTPTimeout = 60 * time.Second

// NewBlockStorageClient returns a block storage v3 client for c. With
// Keystone it logs in first (and re-authenticates when the token expires);
// with noauth it only builds the URL. userAgent is prepended to
// gophercloud's own.
func NewBlockStorageClient(ctx context.Context, c *Config, userAgent string) (*gophercloud.ServiceClient, error) {
	httpClient, err := c.httpClient()
	if err != nil {
		return nil, err
	}
	switch c.Mode {
	case AuthNoAuth:
		provider, err := noauth.NewClient(gophercloud.AuthOptions{Username: c.Username, TenantName: c.Project()})
		if err != nil {
			return nil, err
		}
		provider.HTTPClient = *httpClient
		provider.UserAgent.Prepend(userAgent)
		client, err := noauth.NewBlockStorageNoAuthV3(provider, noauth.EndpointOpts{CinderEndpoint: c.CinderEndpoint})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Source, err)
		}
		return client, nil
	case AuthKeystone:
		provider, err := openstack.NewClient(c.AuthURL)
		if err != nil {
			return nil, fmt.Errorf("%s: auth-url: %w", c.Source, err)
		}
		provider.HTTPClient = *httpClient
		provider.UserAgent.Prepend(userAgent)
		if err := openstack.Authenticate(ctx, provider, c.authOptions()); err != nil {
			return nil, fmt.Errorf("logging in to Keystone at %s: %w", c.AuthURL, c.redactError(err))
		}
		// Re-authentication happens inside any later call, when the token
		// expires; its error ends up in events, so it gets the same care.
		if reauth := provider.ReauthFunc; reauth != nil {
			provider.ReauthFunc = func(ctx context.Context) error {
				return reauthError(reauth(ctx), c)
			}
		}
		client, err := openstack.NewBlockStorageV3(provider, gophercloud.EndpointOpts{Region: c.Region, Availability: gophercloud.Availability(c.EndpointType)})
		if err != nil {
			return nil, fmt.Errorf("finding Cinder (block-storage v3) in the Keystone catalog, region %q: %w", c.Region, err)
		}
		return client, nil
	default:
		return nil, fmt.Errorf("unknown auth mode %q", c.Mode)
	}
}

// authOptions maps c to gophercloud's: an application credential (no scope:
// it carries its project), a password scoped to a trust (with the trustee's
// id and password when set), or a password scoped to the project, by id or
// by name in its domain. The user's domain and the project's are separate.
func (c *Config) authOptions() gophercloud.AuthOptions {
	userDomainID, userDomainName := c.userDomain()
	o := gophercloud.AuthOptions{
		IdentityEndpoint: c.AuthURL,
		Username:         c.Username,
		UserID:           c.UserID,
		DomainID:         userDomainID,
		DomainName:       userDomainName,
		// Tokens expire (Keystone's default is an hour); the provisioner
		// runs for months.
		AllowReauth: true,
	}
	switch {
	case c.Token != "":
		o.TokenID = c.Token
		o.Username, o.UserID, o.DomainID, o.DomainName = "", "", "", ""
		o.Scope = c.projectScope()
		if c.TrustID != "" {
			o.Scope = &gophercloud.AuthScope{TrustID: c.TrustID}
		}
	case c.ApplicationCredential():
		// gophercloud prefers a password when one is set.
		o.ApplicationCredentialID = c.ApplicationCredentialID
		o.ApplicationCredentialName = c.ApplicationCredentialName
		o.ApplicationCredentialSecret = c.ApplicationCredentialSecret
		if c.ApplicationCredentialID != "" {
			o.Username, o.UserID, o.DomainID, o.DomainName = "", "", "", ""
		}
	case c.TrustID != "":
		o.Password = c.Password
		if c.TrusteeID != "" {
			o.UserID, o.Username, o.DomainID, o.DomainName = c.TrusteeID, "", "", ""
		}
		if c.TrusteePassword != "" {
			o.Password = c.TrusteePassword
		}
		o.Scope = &gophercloud.AuthScope{TrustID: c.TrustID}
	default:
		o.Password = c.Password
		// Keystone v2.0 reads these; v3 the scope.
		o.TenantID, o.TenantName = c.TenantID, c.TenantName
		o.Scope = c.projectScope()
	}
	if o.UserID != "" {
		// A user given by id needs no domain; Keystone refuses both.
		o.DomainID, o.DomainName = "", ""
	}
	return o
}

// projectScope is the project by id, or by name in its domain; nil without
// a project (a token then keeps the scope it has).
func (c *Config) projectScope() *gophercloud.AuthScope {
	switch {
	case c.TenantID != "":
		return &gophercloud.AuthScope{ProjectID: c.TenantID}
	case c.TenantName != "":
		id, name := c.projectDomain()
		return &gophercloud.AuthScope{ProjectName: c.TenantName, DomainID: id, DomainName: name}
	}
	return nil
}

// httpClient trusts CAFile on top of the system roots and redacts c's
// secrets from every error answer.
func (c *Config) httpClient() (*http.Client, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%s: ca-file: %w", c.Source, err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: ca-file %s holds no PEM certificate", c.Source, c.CAFile)
		}
		tlsConfig.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s: cert-file and key-file: %w", c.Source, err)
		}
		tlsConfig.Certificates = []tls.Certificate{cert}
	}
	// tls-insecure: the cloud provider's key, for test clouds only.
	tlsConfig.InsecureSkipVerify = c.TLSInsecure //nolint:gosec // G402: the admin asked for it (tls-insecure)
	transport.TLSClientConfig = tlsConfig
	return &http.Client{Transport: &redactingTransport{next: transport, config: c}, Timeout: DefaultHTTPTimeout}, nil
}

// reauthError keeps of a failed re-authentication what helps an admin (the
// status code, the Keystone URL) and drops what Keystone or a proxy said,
// which may echo credentials.
func reauthError(err error, c *Config) error {
	if err == nil {
		return nil
	}
	var code gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &code) {
		if c.Token != "" {
			return fmt.Errorf("re-authenticating with Keystone at %s: it answered %d: the configured token has probably expired and cannot be renewed; log in with an application credential or a password instead", c.AuthURL, code.Actual)
		}
		return fmt.Errorf("re-authenticating with Keystone at %s: it answered %d", c.AuthURL, code.Actual)
	}
	return fmt.Errorf("re-authenticating with Keystone at %s: %w", c.AuthURL, c.redactError(err))
}
