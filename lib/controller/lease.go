// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"crypto/sha256"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// metaForLease names the one Lease of a provisioner name.
func metaForLease(namespace, provisioner string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: ObjectName(provisioner)}
}

// ObjectName turns a provisioner name such as "kubeprov.io/hostpath" into a
// valid object name ("kubeprov.io-hostpath"): the name of its leader Lease.
func ObjectName(provisioner string) string {
	n := invalidNameChars.ReplaceAllString(strings.ToLower(provisioner), "-")
	n = strings.Trim(n, "-.")
	if len(n) > 200 {
		n = n[:200]
	}
	return n
}

// JournalName is the in-flight journal ConfigMap of a provisioner:
// "<object name>-inflight", or, for one of several instances that run side by
// side without leader election (one per node), "<object name>-<instance>-inflight".
// Names that would be too long or invalid fall back to a digest that is still
// distinct per instance.
func JournalName(provisioner, instance string) string {
	name := ObjectName(provisioner) + "-inflight"
	if instance != "" {
		name = ObjectName(provisioner) + "-" + instance + "-inflight"
	}
	if len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	return fmt.Sprintf("journal-%x-inflight", sha256.Sum256([]byte(provisioner+"\x00"+instance)))
}
