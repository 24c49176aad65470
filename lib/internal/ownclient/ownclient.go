// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package ownclient derives, from a clientset, a core/v1 client on the same
// connection and credentials with a decoder and a rate limiter of its own:
// the informers' settled decoder (package cachedecode), and the journal's
// writes, which must never wait behind the PV writes in the main client's
// rate limiter (package journal).
package ownclient

import (
	"net/url"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// CoreV1 returns client's core/v1 API on its connection (its HTTP client:
// transport, credentials, timeout) with content and limiter instead of
// client's; a nil limiter throttles nothing. ok is false when client has no
// REST client to share (a fake clientset).
func CoreV1(client kubernetes.Interface, content rest.ClientContentConfig, limiter flowcontrol.RateLimiter) (c corev1client.CoreV1Interface, ok bool) {
	rc, isREST := client.CoreV1().RESTClient().(*rest.RESTClient)
	if !isREST || rc == nil || rc.Client == nil {
		return nil, false
	}
	prefix := rc.Get().URL() // the base URL, its path the versioned API path
	base := &url.URL{Scheme: prefix.Scheme, User: prefix.User, Host: prefix.Host}
	restClient, err := rest.NewRESTClient(base, prefix.Path, content, limiter, rc.Client)
	if err != nil {
		return nil, false
	}
	return corev1client.New(restClient), true
}

// Protobuf is the content of a core/v1 client that speaks protobuf (JSON
// where the server has no protobuf) and decodes with codecs.
func Protobuf(codecs runtime.NegotiatedSerializer) rest.ClientContentConfig {
	gv := corev1.SchemeGroupVersion
	return rest.ClientContentConfig{
		AcceptContentTypes: runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON,
		ContentType:        runtime.ContentTypeProtobuf,
		GroupVersion:       gv,
		Negotiator:         runtime.NewClientNegotiator(codecs, gv),
	}
}

// Limiter is client's core/v1 rate limiter (nil if it has none).
func Limiter(client kubernetes.Interface) flowcontrol.RateLimiter {
	if rc, ok := client.CoreV1().RESTClient().(*rest.RESTClient); ok && rc != nil {
		return rc.GetRateLimiter()
	}
	return nil
}
