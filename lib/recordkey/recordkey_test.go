// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package recordkey

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubeprov/external-storage/lib/gate"
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

// withUIDs makes a fake clientset give created objects a UID, as the API
// server does.
func withUIDs(c *fake.Clientset) *fake.Clientset {
	n := 0
	c.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.CreateAction).GetObject().(*corev1.Secret)
		n++
		s.UID = types.UID(fmt.Sprintf("uid-%d", n))
		return false, nil, nil
	})
	return c
}

// Issue 36 case 2: a key Secret someone else created before the first
// start (a key they know) is refused with an error naming it, whatever it
// claims; the one the provisioner creates is sealed with its UID and
// accepted at every later start.
func TestLoadRefusesASecretItDidNotCreate(t *testing.T) {
	key := []byte(strings.Repeat("k", KeyBytes))
	for name, planted := range map[string]*corev1.Secret{
		"no seal": {ObjectMeta: metav1.ObjectMeta{Name: "k", Namespace: "ns", UID: "u1"}},
		"a seal of another object": {ObjectMeta: metav1.ObjectMeta{Name: "k", Namespace: "ns", UID: "u1",
			Annotations: map[string]string{gate.SealAnnotation: "u0"}}},
	} {
		planted.Data = map[string][]byte{SecretField: key}
		_, err := Load(t.Context(), fake.NewClientset(planted).CoreV1().Secrets("ns"), "k", nil)
		if err == nil || !strings.Contains(err.Error(), "Secret ns/k") || gate.Refused(err) != gate.RuleSealedSecret {
			t.Errorf("%s: Load = %v, want the Secret refused by name", name, err)
		}
	}
	secrets := withUIDs(fake.NewClientset()).CoreV1().Secrets("ns")
	first, err := Load(t.Context(), secrets, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := secrets.Get(t.Context(), "k", metav1.GetOptions{})
	if err != nil || s.UID == "" || s.Annotations[gate.SealAnnotation] != string(s.UID) {
		t.Fatalf("created Secret not sealed with its UID: %v %v", s.ObjectMeta, err)
	}
	if again, err := Load(t.Context(), secrets, "k", nil); err != nil || !bytes.Equal(first, again) {
		t.Fatalf("the provisioner's own Secret refused at the next start: %v", err)
	}
}
