// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// metaForLease names the one Lease of a provisioner name.
func metaForLease(namespace, provisioner string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: sanitizeName(provisioner)}
}

// sanitizeName turns a provisioner name such as "kubeprov.io/hostpath" into
// a valid object name.
func sanitizeName(provisioner string) string {
	n := invalidNameChars.ReplaceAllString(strings.ToLower(provisioner), "-")
	n = strings.Trim(n, "-.")
	if len(n) > 200 {
		n = n[:200]
	}
	return n
}
