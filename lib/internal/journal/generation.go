// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprov/external-storage/lib/recordkey"
)

// signingKey loads the key that signs entries, once; with reload it reads
// the Secret again for the journal's generation (at each Load: another
// instance may have moved it on since this one last wrote), and refuses a
// key that changed.
func (j *Journal) signingKey(ctx context.Context, reload bool) ([]byte, error) {
	j.keyMu.Lock()
	defer j.keyMu.Unlock()
	if j.key != nil && !reload {
		return j.key, nil
	}
	secret, key, err := recordkey.LoadSecret(ctx, j.client.CoreV1().Secrets(j.namespace), KeySecret,
		j.labels)
	if err != nil {
		return nil, fmt.Errorf("loading the in-flight journal's signing key: %w", err)
	}
	gen, err := j.generationIn(secret)
	if err != nil {
		return nil, err
	}
	if j.key != nil && !bytes.Equal(key, j.key) {
		return nil, fmt.Errorf("the key in Secret %s/%s was replaced while the provisioner ran: restart it", j.namespace, KeySecret)
	}
	j.mu.Lock()
	j.gen = gen
	j.mu.Unlock()
	j.key, j.secret = key, secret
	return key, nil
}

// generationKey is the key Secret's data key holding this journal's generation.
func (j *Journal) generationKey() string { return GenerationPrefix + j.name }

// generationIn reads this journal's generation from the key Secret: 0 when
// it has none yet.
func (j *Journal) generationIn(s *corev1.Secret) (uint64, error) {
	v, ok := s.Data[j.generationKey()]
	if !ok {
		return 0, nil
	}
	gen, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("secret %s/%s: %s is not a number", s.Namespace, s.Name, j.generationKey())
	}
	return gen, nil
}

// errGenerationMoved: another instance moved the journal's generation on.
var errGenerationMoved = errors.New("the journal's generation was moved on by another instance")

// advance moves the journal's generation on in the key Secret, then signs
// every entry again over the new one: an entry kept from before no longer
// verifies, so removals written after this cannot be undone by writing a
// removed entry back (gate.FreshEntry). Only the provisioner can update the
// Secret. With takeOver false it refuses (errGenerationMoved) when the
// generation is no longer the one this instance signs with: another
// instance writes the journal now, and moving on would void its entries.
//
// A crash after the Secret is written and before the entries signed again
// are loses those entries (a restart refuses and reports them, and claims
// that still exist are recorded again): it can leak an asset, never delete
// one.
func (j *Journal) advance(ctx context.Context, takeOver bool) error {
	j.keyMu.Lock()
	defer j.keyMu.Unlock()
	if j.secret == nil {
		return errors.New("the in-flight journal's key is not loaded")
	}
	secrets := j.writer.Secrets(j.namespace)
	s := j.secret
	for attempt := 0; ; attempt++ {
		onServer, err := j.generationIn(s)
		if err != nil {
			return err
		}
		j.mu.Lock()
		gen := j.gen
		j.mu.Unlock()
		if onServer != gen && !takeOver {
			return errGenerationMoved
		}
		next := max(onServer, gen) + 1
		update := s.DeepCopy()
		update.Data[j.generationKey()] = []byte(strconv.FormatUint(next, 10))
		written, err := secrets.Update(ctx, update, metav1.UpdateOptions{})
		if err == nil {
			j.secret = written
			j.mu.Lock()
			j.gen = next
			j.resign()
			j.mu.Unlock()
			return nil
		}
		if !apierrors.IsConflict(err) || attempt >= 4 {
			return fmt.Errorf("moving the in-flight journal's generation on in Secret %s/%s (update on it is needed): %w", j.namespace, KeySecret, err)
		}
		// The journals of other instances share the Secret.
		fresh, key, err := recordkey.LoadSecret(ctx, secrets, KeySecret, j.labels)
		if err != nil {
			return err
		}
		if fresh.UID != s.UID || !bytes.Equal(key, j.key) {
			return fmt.Errorf("secret %s/%s was replaced while the provisioner ran: restart it", j.namespace, KeySecret)
		}
		s = fresh
	}
}

// resign signs every entry again over the journal's generation; j.mu is
// held. Kept entries stay as they are: nothing acts on them.
func (j *Journal) resign() {
	for _, s := range j.shards {
		for pvName, data := range s.entries {
			unsigned, _, _ := splitSignedEntry(data)
			s.entries[pvName] = signedEntry([]byte(unsigned), j.sign(j.key, pvName, unsigned, s.classes[s.classOf[pvName]]))
		}
	}
}
