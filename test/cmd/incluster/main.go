// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command incluster is the test image of test/cluster: it does what every
// in-cluster client does first (KUBERNETES_SERVICE_HOST/PORT, the service
// account's token and CA) and prints the apiserver's version, proving that a
// pod reaches the apiserver and is authenticated. Plain HTTP, no client-go:
// the image stays a few MB.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount/"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "incluster:", err)
		os.Exit(1)
	}
}

func run() error {
	token, err := os.ReadFile(saDir + "token")
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(saDir + "ca.crt")
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("no certificate in %sca.crt", saDir)
	}
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	url := "https://" + net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")) + "/version"
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+string(token))
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var version struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&version); err != nil {
		return err
	}
	fmt.Printf("uid %d reached apiserver %s at %s\n", os.Getuid(), version.GitVersion, url)
	return nil
}
