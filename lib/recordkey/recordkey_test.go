// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package recordkey

import (
	"bytes"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestLoadCreatesOnceAndRereads(t *testing.T) {
	ctx := t.Context()
	secrets := fake.NewClientset().CoreV1().Secrets("ns")
	first, err := Load(ctx, secrets, "k", map[string]string{"a": "b"})
	if err != nil || len(first) != KeyBytes {
		t.Fatalf("Load: %v, %d bytes", err, len(first))
	}
	again, err := Load(ctx, secrets, "k", nil)
	if err != nil || !bytes.Equal(first, again) {
		t.Fatalf("second Load returned another key (%v)", err)
	}
}

func TestLoadRefusesAShortKey(t *testing.T) {
	short := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "k", Namespace: "ns"}, Data: map[string][]byte{SecretField: []byte("x")}}
	if _, err := Load(t.Context(), fake.NewClientset(short).CoreV1().Secrets("ns"), "k", nil); err == nil {
		t.Fatal("a one-byte key was accepted")
	}
}

func TestSignBindsEveryField(t *testing.T) {
	key := bytes.Repeat([]byte{1}, KeyBytes)
	sig := Sign(key, "pv", "record")
	if !Verify(key, sig, "pv", "record") {
		t.Fatal("own signature refused")
	}
	for _, fields := range [][]string{{"pv", "recorD"}, {"pvr", "ecord"}, {"pv", "record", ""}, {"pv"}} {
		if Verify(key, sig, fields...) {
			t.Errorf("signature of [pv record] accepted for %q", fields)
		}
	}
	if Verify(bytes.Repeat([]byte{2}, KeyBytes), sig, "pv", "record") {
		t.Error("accepted under another key")
	}
	if Sign(nil, "pv") != "" || Verify(nil, "", "pv") {
		t.Error("no key must mean no signature, and nothing verifies")
	}
}
