// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package connection

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The CSI sidecars' metric of driver calls (kubernetes-csi/csi-lib-utils):
// same name, labels and buckets, so that their dashboards work unchanged.
const (
	// OperationsMetric is the histogram of CSI calls.
	OperationsMetric = "csi_sidecar_operations_seconds"
	// UnknownDriver is the driver_name of calls made before the driver said
	// its name (GetPluginInfo).
	UnknownDriver = "unknown-driver"
	// nonGRPCError is the grpc_status_code of a call that failed before it
	// reached gRPC.
	nonGRPCError = "unknown-non-grpc"
)

var operationsBuckets = []float64{.1, .25, .5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600}

// Metrics records the duration and result of every call to the driver.
type Metrics struct {
	driver    atomic.Pointer[string]
	histogram *prometheus.HistogramVec
}

// NewMetrics registers the CSI call metric on r.
func NewMetrics(r prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{histogram: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    OperationsMetric,
		Help:    "Duration of CSI calls to the driver, by driver, gRPC method and gRPC status code.",
		Buckets: operationsBuckets,
	}, []string{"driver_name", "method_name", "grpc_status_code"})}
	if err := r.Register(m.histogram); err != nil {
		return nil, err
	}
	m.SetDriverName("")
	return m, nil
}

// SetDriverName sets driver_name of the calls that follow; "" is UnknownDriver.
func (m *Metrics) SetDriverName(name string) {
	if name == "" {
		name = UnknownDriver
	}
	m.driver.Store(&name)
}

// Interceptor records each unary call: method_name is the full gRPC method
// (/csi.v1.Controller/CreateVolume), grpc_status_code its code's name (OK,
// DeadlineExceeded, ...).
func (m *Metrics) Interceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		start := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		m.histogram.WithLabelValues(*m.driver.Load(), method, statusCode(err)).Observe(time.Since(start).Seconds())
		return err
	}
}

func statusCode(err error) string {
	if err == nil {
		return codes.OK.String()
	}
	if s, ok := status.FromError(err); ok {
		return s.Code().String()
	}
	return nonGRPCError
}
