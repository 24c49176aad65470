// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// echoServer answers a client as an API server would for the provision
// path's writes, without one: a create or update returns the object sent, a
// read finds nothing. The client encodes and decodes as the binaries' do
// (protobuf), so what is measured is the controller's own work.
type echoServer struct{}

var notFoundStatus = []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)

func (echoServer) RoundTrip(req *http.Request) (*http.Response, error) {
	resp := &http.Response{Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, Request: req}
	switch req.Method {
	case http.MethodPost, http.MethodPut:
		resp.StatusCode = http.StatusOK
		if req.Method == http.MethodPost {
			resp.StatusCode = http.StatusCreated
		}
		resp.Header.Set("Content-Type", req.Header.Get("Content-Type"))
		resp.Body = req.Body // not copied: only the controller's allocations count
	default:
		resp.StatusCode = http.StatusNotFound
		resp.Header.Set("Content-Type", runtime.ContentTypeJSON)
		resp.Body = io.NopCloser(bytes.NewReader(notFoundStatus))
	}
	return resp, nil
}

// BenchmarkProvisionClaim is the controller's cost per provisioned claim:
// the claim's sync (journal record, Provision, the PV saved), its journal
// write and its events. One claim at a time, so that each record is one
// journal write (a burst shares them) and the numbers repeat. The informers
// are not running: the watch events that follow have
// BenchmarkSettledDecoding. Compare allocations (B/op, allocs/op): they do
// not depend on the machine's load.
func BenchmarkProvisionClaim(b *testing.B) {
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	defer cancel()
	client := kubernetes.NewForConfigOrDie(&rest.Config{
		Host: "http://bench.invalid", Transport: echoServer{},
		ContentConfig: rest.ContentConfig{ContentType: runtime.ContentTypeProtobuf,
			AcceptContentTypes: runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON},
		QPS: -1,
	})
	c, err := NewProvisionController(client, testProvisioner, noopStore{}, WithEventFlushInterval(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	if err := c.classInformer.GetIndexer().Add(class("gold")); err != nil {
		b.Fatal(err)
	}
	for i := range b.N {
		if err := c.claimInformer.GetIndexer().Add(claim(fmt.Sprintf("claim-%d", i), "gold")); err != nil {
			b.Fatal(err)
		}
	}
	events := make(chan struct{})
	go func() { defer close(events); c.events.Run(ctx) }()
	go c.journal.Run(ctx)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := c.syncClaim(ctx, fmt.Sprintf("ns/claim-%d", i)); err != nil {
			b.Fatal(err)
		}
	}
	// The claims' events are part of their cost: wait until all are written.
	for testutil.ToFloat64(c.metrics.eventsWritten.WithLabelValues("single")) < float64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	cancel()
	<-events
	b.ReportMetric(testutil.ToFloat64(c.metrics.journalWrites)/float64(b.N), "journal-writes/op")
}

// noopStore provisions in memory, so that only the controller is measured.
type noopStore struct{}

func (noopStore) Provision(_ context.Context, o ProvisionOptions) (*corev1.PersistentVolume, ProvisioningState, error) {
	return o.NewVolume(VolumeSpec{Source: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/noop/" + o.PVName}}}),
		ProvisioningFinished, nil
}

func (noopStore) Delete(context.Context, *corev1.PersistentVolume) error { return nil }
