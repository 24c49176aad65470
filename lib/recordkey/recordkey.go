// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package recordkey signs what a provisioner records in objects that others
// can write (a PV's annotations, a journal ConfigMap), so that it acts only
// on records it made itself. The key lives in a Secret in the provisioner's
// namespace, created with random bytes on first use; whoever cannot read that
// Secret cannot make a record the provisioner accepts.
package recordkey

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

const (
	// KeyBytes is the size of a key Load creates, and the least it accepts.
	KeyBytes = 32
	// SecretField is the Secret's data key holding the key.
	SecretField = "key"
)

// Load reads the key from the Secret name, creating the Secret with a random
// key (and labels) when it does not exist. Replicas that start together all
// end with the one key that was created first.
func Load(ctx context.Context, secrets typedcorev1.SecretInterface, name string, labels map[string]string) ([]byte, error) {
	for range 2 {
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			if key := s.Data[SecretField]; len(key) >= KeyBytes {
				return key, nil
			}
			return nil, fmt.Errorf("secret %s/%s has no key of at least %d bytes in %q", s.Namespace, name, KeyBytes, SecretField)
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading the record key secret %s: %w", name, err)
		}
		key := make([]byte, KeyBytes)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("making a record key: %w", err)
		}
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Data:       map[string][]byte{SecretField: key},
		}, metav1.CreateOptions{})
		if err == nil {
			return key, nil
		}
		if !apierrors.IsAlreadyExists(err) { // another replica won: read its key
			return nil, fmt.Errorf("creating the record key secret %s: %w", name, err)
		}
	}
	return nil, errors.New("the record key secret keeps changing")
}

// Sign returns the hex HMAC-SHA256 of fields, separated by NUL bytes (which
// no field may contain but the last). Without a key it returns "", which
// Verify never accepts: a signer built without its key must not produce
// signatures anyone could compute.
func Sign(key []byte, fields ...string) string {
	if len(key) == 0 {
		return ""
	}
	mac := hmac.New(sha256.New, key)
	for i, f := range fields {
		if i > 0 {
			mac.Write([]byte{0})
		}
		mac.Write([]byte(f))
	}
	return hex.EncodeToString(mac.Sum(nil))
}

// Verify reports whether signature is Sign(key, fields...), in constant time.
func Verify(key []byte, signature string, fields ...string) bool {
	if len(key) == 0 || signature == "" {
		return false
	}
	return hmac.Equal([]byte(signature), []byte(Sign(key, fields...)))
}
