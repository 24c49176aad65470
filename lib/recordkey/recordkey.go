// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package recordkey signs what a provisioner records in objects that others
// can write (a PV's annotations, a journal ConfigMap), so that it acts only
// on records it made itself. The key lives in a Secret in the provisioner's
// namespace, created with random bytes on first use and sealed (it names its
// own UID, see gate.SealedSecret); whoever cannot read that Secret cannot
// make a record the provisioner accepts, and a Secret the provisioner did
// not create is refused.
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

	"github.com/kubeprov/external-storage/lib/gate"
)

const (
	// KeyBytes is the size of a key Load creates, and the least it accepts.
	KeyBytes = 32
	// SecretField is the Secret's data key holding the key.
	SecretField = "key"
)

// Load reads the key from the Secret name, creating the Secret with a random
// key (and labels) when it does not exist. Replicas that start together all
// end with the one key that was created first. A Secret the provisioner did
// not create is refused with an error naming it (gate.SealedSecret).
func Load(ctx context.Context, secrets typedcorev1.SecretInterface, name string, labels map[string]string) ([]byte, error) {
	_, key, err := LoadSecret(ctx, secrets, name, labels)
	return key, err
}

// LoadSecret is Load that also returns the Secret as last read or written,
// for records a provisioner keeps beside its key (the journal's generation).
//
// A Secret is trusted only when it is sealed: it names its own UID
// (gate.SealAnnotation), which only an update after its creation can add.
// The provisioner seals the Secret it has just created (the API server
// answered 201 to its create); whoever may create, but not update, Secrets
// in its namespace cannot make one that passes, so a key they planted
// before the first start is never used.
func LoadSecret(ctx context.Context, secrets typedcorev1.SecretInterface, name string, labels map[string]string) (*corev1.Secret, []byte, error) {
	for range 2 {
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			key, err := trusted(s)
			return s, key, err
		}
		if !apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("reading the record key secret %s: %w", name, err)
		}
		key := make([]byte, KeyBytes)
		if _, err := rand.Read(key); err != nil {
			return nil, nil, fmt.Errorf("making a record key: %w", err)
		}
		created, err := secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Data:       map[string][]byte{SecretField: key},
		}, metav1.CreateOptions{})
		if err == nil {
			sealed, err := seal(ctx, secrets, created)
			return sealed, key, err
		}
		if !apierrors.IsAlreadyExists(err) { // another replica won: read its key
			return nil, nil, fmt.Errorf("creating the record key secret %s: %w", name, err)
		}
	}
	return nil, nil, errors.New("the record key secret keeps changing")
}

// trusted returns the key of a sealed Secret.
func trusted(s *corev1.Secret) ([]byte, error) {
	if err := gate.SealedSecret(s); err != nil {
		return nil, err
	}
	if key := s.Data[SecretField]; len(key) >= KeyBytes {
		return key, nil
	}
	return nil, fmt.Errorf("secret %s/%s has no key of at least %d bytes in %q", s.Namespace, s.Name, KeyBytes, SecretField)
}

// seal writes the UID of the Secret this process has just created into it.
// Until it is written nothing is signed with the key; if it never is (a
// crash in between), the next start refuses the Secret and says so.
func seal(ctx context.Context, secrets typedcorev1.SecretInterface, created *corev1.Secret) (*corev1.Secret, error) {
	s := created.DeepCopy()
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[gate.SealAnnotation] = string(s.UID)
	sealed, err := secrets.Update(ctx, s, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("sealing the record key secret %s/%s just created (update on secrets %s is needed): %w", created.Namespace, created.Name, created.Name, err)
	}
	return sealed, gate.SealedSecret(sealed)
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
