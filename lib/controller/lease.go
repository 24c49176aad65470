// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"crypto/sha256"
	"fmt"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// metaForLease names the one Lease of a provisioner name, unless the
// controller was given another (WithLeaseName).
func metaForLease(namespace, provisioner, name string) metav1.ObjectMeta {
	if name == "" {
		name = LeaseName(provisioner)
	}
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}

// LeaseName turns a provisioner name into the name of its leader Lease, and
// the stem of its journal's name. A name that is a valid object name already
// ("example.com-dir") is kept; any other is made valid ("kubeprov.io/hostpath"
// -> "kubeprov.io-hostpath-<digest>") and given a digest of the original, so
// that two provisioner names never share a Lease or a journal:
// "kubeprov.io/nfs", "kubeprov.io-nfs" and "Kubeprov.io/NFS" are three.
func LeaseName(provisioner string) string {
	// A valid name that looks like a cleaned one with its digest is digested
	// too: kept as is, it could equal another name's object name.
	if len(provisioner) <= maxObjectStem && len(validation.IsDNS1123Subdomain(provisioner)) == 0 && !digestSuffix.MatchString(provisioner) {
		return provisioner
	}
	n := invalidNameChars.ReplaceAllString(strings.ToLower(provisioner), "-")
	n = strings.Trim(n, "-.")
	if len(n) > maxObjectStem-nameDigestLength-1 {
		n = strings.TrimRight(n[:maxObjectStem-nameDigestLength-1], "-.")
	}
	if n == "" {
		n = "provisioner"
	}
	return n + "-" + nameDigest(provisioner)
}

// JournalName is the in-flight journal ConfigMap of a provisioner:
// "<object name>-inflight", or, for one of several instances that run side by
// side without leader election (one per node),
// "<object name>-<instance>-<digest>-inflight", the digest keeping provisioner
// and instance apart ("a" on node "b-c" is not "a-b" on node "c").
func JournalName(provisioner, instance string) string {
	if instance == "" {
		return LeaseName(provisioner) + "-inflight"
	}
	stem := invalidNameChars.ReplaceAllString(strings.ToLower(LeaseName(provisioner)+"-"+instance), "-")
	if len(stem) > maxObjectStem-nameDigestLength-1 {
		stem = stem[:maxObjectStem-nameDigestLength-1]
	}
	return strings.Trim(stem, "-.") + "-" + nameDigest(provisioner+"\x00"+instance) + "-inflight"
}

const (
	// maxObjectStem leaves room for suffixes within the 253 characters of an
	// object name.
	maxObjectStem    = 200
	nameDigestLength = 10
)

var invalidNameChars = regexp.MustCompile(`[^a-z0-9.-]+`)

var digestSuffix = regexp.MustCompile(fmt.Sprintf(`-[0-9a-f]{%d}$`, nameDigestLength))

func nameDigest(s string) string {
	return fmt.Sprintf("%x", sha256.Sum256([]byte(s)))[:nameDigestLength]
}
