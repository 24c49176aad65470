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
	"strings"
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
			return nil, fmt.Errorf("logging in to Keystone at %s: %w", c.AuthURL, scrub(err, c.Password))
		}
		// Re-authentication happens inside any later call, when the token
		// expires; its error ends up in events, so it gets the same care.
		if reauth := provider.ReauthFunc; reauth != nil {
			provider.ReauthFunc = func(ctx context.Context) error {
				return reauthError(reauth(ctx), c)
			}
		}
		client, err := openstack.NewBlockStorageV3(provider, gophercloud.EndpointOpts{Region: c.Region})
		if err != nil {
			return nil, fmt.Errorf("finding Cinder (block-storage v3) in the Keystone catalog, region %q: %w", c.Region, err)
		}
		return client, nil
	default:
		return nil, fmt.Errorf("unknown auth mode %q", c.Mode)
	}
}

func (c *Config) authOptions() gophercloud.AuthOptions {
	o := gophercloud.AuthOptions{
		IdentityEndpoint: c.AuthURL,
		Username:         c.Username,
		UserID:           c.UserID,
		Password:         c.Password,
		TenantID:         c.TenantID,
		TenantName:       c.TenantName,
		DomainID:         c.DomainID,
		DomainName:       c.DomainName,
		// Tokens expire (Keystone's default is an hour); the provisioner
		// runs for months.
		AllowReauth: true,
	}
	if c.TrustID != "" {
		o.Scope = &gophercloud.AuthScope{TrustID: c.TrustID}
	}
	return o
}

// httpClient trusts CAFile on top of the system roots.
func (c *Config) httpClient() (*http.Client, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
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
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: transport, Timeout: DefaultHTTPTimeout}, nil
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
		return fmt.Errorf("re-authenticating with Keystone at %s: it answered %d", c.AuthURL, code.Actual)
	}
	return fmt.Errorf("re-authenticating with Keystone at %s: %w", c.AuthURL, scrub(err, c.Password))
}

// scrub makes sure an error never carries the password, whatever a server
// echoed back.
func scrub(err error, password string) error {
	if err == nil || password == "" {
		return err
	}
	if msg := err.Error(); strings.Contains(msg, password) {
		return errors.New(strings.ReplaceAll(msg, password, "<redacted>"))
	}
	return err
}
