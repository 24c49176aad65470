// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeprov/external-storage/test/framework"
)

// apiCounter is a reverse proxy in front of kube-apiserver that counts every
// request passing through it by "client verb resource". The provisioner
// under test talks to the API only through it (its --kubeconfig points
// here), so every provisioner binary is measured alike without
// instrumenting it. The client is "events" for requests on events (the
// controller writes them through a client of their own) and "main" for the
// rest.
type apiCounter struct {
	// Kubeconfig points at the proxy, without credentials: the proxy adds the
	// admin's.
	Kubeconfig string
	// Config is a client configuration for the proxy.
	Config *rest.Config

	srv *http.Server

	mu     sync.Mutex
	counts map[string]float64
}

// newAPICounter starts the proxy for the control plane and writes its
// kubeconfig into dir. It speaks plain HTTP/1.1, where a client with many
// workers opens more connections than it keeps idle (25) and dialing
// them is part of its CPU; with h2 it serves TLS with HTTP/2 instead, as
// kube-apiserver does, so that the client multiplexes its requests on one
// connection as in a cluster (and pays for TLS and HTTP/2 framing).
func newAPICounter(cp *framework.ControlPlane, dir string, h2 bool) (*apiCounter, error) {
	upstream := cp.RestConfig()
	target, err := url.Parse(upstream.Host)
	if err != nil {
		return nil, err
	}
	transport, err := rest.TransportFor(upstream)
	if err != nil {
		return nil, err
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) },
		// The admin's certificate authenticates every request.
		Transport: transport,
		// Watches stream: pass every event on at once.
		FlushInterval: -1,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &apiCounter{
		Kubeconfig: filepath.Join(dir, "counted.kubeconfig"),
		Config:     &rest.Config{Host: "http://" + ln.Addr().String()},
		counts:     map[string]float64{},
	}
	a.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a.count(r)
			proxy.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	if h2 {
		cert, caPEM, err := selfSignedLoopback()
		if err != nil {
			_ = ln.Close()
			return nil, err
		}
		a.srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, a.srv.TLSConfig)
		a.Config.Host = "https://" + ln.Addr().String()
		a.Config.CAData = caPEM
	}
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["counted"] = &clientcmdapi.Cluster{Server: a.Config.Host, CertificateAuthorityData: a.Config.CAData}
	kubeconfig.AuthInfos["counted"] = &clientcmdapi.AuthInfo{}
	kubeconfig.Contexts["counted"] = &clientcmdapi.Context{Cluster: "counted", AuthInfo: "counted"}
	kubeconfig.CurrentContext = "counted"
	if err := clientcmd.WriteToFile(*kubeconfig, a.Kubeconfig); err != nil {
		_ = ln.Close()
		return nil, err
	}
	go func() {
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logf("API counter: %v", err)
		}
	}()
	return a, nil
}

// selfSignedLoopback is a certificate for 127.0.0.1 that is its own CA,
// with that CA in PEM.
func selfSignedLoopback() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "bench API counter"},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// Close stops the proxy, cutting the watches that go through it.
func (a *apiCounter) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := a.srv.Shutdown(ctx); err != nil {
		return a.srv.Close()
	}
	return nil
}

func (a *apiCounter) count(r *http.Request) {
	verb := strings.ToLower(r.Method)
	if r.URL.Query().Get("watch") == "true" {
		verb = "watch"
	}
	if r.URL.Query().Has("dryRun") {
		// Validated and admitted, never stored: not a write (see isWrite).
		verb += "-dryrun"
	}
	resource := resourceOf(r.URL.Path)
	client := "main"
	if resource == "events" {
		client = "events"
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.counts[fmt.Sprintf("%s %s %s", client, verb, resource)]++
}

// snapshot is the number of requests so far by "client verb resource".
func (a *apiCounter) snapshot() map[string]float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.counts)
}

// resourceOf is the resource of an API path: /api/v1/namespaces/ns/events/x
// is events, /apis/coordination.k8s.io/v1/namespaces/ns/leases is leases,
// /api/v1/namespaces/ns is namespaces.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "other"
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	return parts[0]
}

// writes counts the writes in requests by "client verb resource".
func writes(requests map[string]float64) float64 {
	total := 0.0
	for k, v := range requests {
		if isWrite(k) {
			total += v
		}
	}
	return total
}

// writesBy counts the writes of one client ("main": the PV path, the
// journal, the Lease; "events").
func writesBy(requests map[string]float64, client string) float64 {
	total := 0.0
	for k, v := range requests {
		if isWrite(k) && strings.Fields(k)[0] == client {
			total += v
		}
	}
	return total
}

func isWrite(key string) bool {
	verb := strings.Fields(key)[1]
	return verb == "post" || verb == "put" || verb == "patch" || verb == "delete"
}

func diff(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}
