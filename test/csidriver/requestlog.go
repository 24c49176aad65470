// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csidriver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Requests are the requests a driver received, in order.
type Requests struct {
	Create   []*csi.CreateVolumeRequest
	Delete   []*csi.DeleteVolumeRequest
	Capacity []*csi.GetCapacityRequest
}

// LastCreate returns a copy of the last CreateVolume request for a name,
// nil if none came.
func (r *Requests) LastCreate(name string) *csi.CreateVolumeRequest {
	for i := len(r.Create) - 1; i >= 0; i-- {
		if r.Create[i].GetName() == name {
			return proto.Clone(r.Create[i]).(*csi.CreateVolumeRequest)
		}
	}
	return nil
}

// add appends a request of a kind Requests holds.
func (r *Requests) add(req proto.Message) error {
	switch req := req.(type) {
	case *csi.CreateVolumeRequest:
		r.Create = append(r.Create, req)
	case *csi.DeleteVolumeRequest:
		r.Delete = append(r.Delete, req)
	case *csi.GetCapacityRequest:
		r.Capacity = append(r.Capacity, req)
	default:
		return fmt.Errorf("no record of %T", req)
	}
	return nil
}

// logLine is one line of Options.RequestLog.
type logLine struct {
	// Method is the request's message name, such as csi.v1.CreateVolumeRequest.
	Method  string          `json:"method"`
	Request json.RawMessage `json:"request"`
}

// record keeps a copy of a request, under the lock, and appends it to the
// RequestLog. A request that cannot be logged is logged as such: the test
// reading the log then misses it and fails.
func (d *Driver) record(req proto.Message) {
	req = proto.Clone(req)
	_ = d.requests.add(req)
	if d.opts.RequestLog == "" {
		return
	}
	if err := appendRequest(d.opts.RequestLog, req); err != nil {
		d.logf("Cannot log the request in %s: %v", d.opts.RequestLog, err)
	}
}

// appendRequest writes one line with req to the log at path, in one write:
// a driver killed meanwhile leaves whole lines, or a last line cut short.
func appendRequest(path string, req proto.Message) error {
	body, err := protojson.Marshal(req)
	if err != nil {
		return err
	}
	line, err := json.Marshal(logLine{Method: string(req.ProtoReflect().Descriptor().FullName()), Request: body})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600) //nolint:gosec // the test's own log file
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// ReadRequestLog returns the requests in a driver's Options.RequestLog, of
// every driver that wrote to it in turn (a driver process and the one that
// replaced it); no file yet holds none. A last line cut short (the driver
// was killed while writing it) is left out.
func ReadRequestLog(path string) (*Requests, error) {
	data, err := os.ReadFile(path) //nolint:gosec // the test's own log file
	if errors.Is(err, fs.ErrNotExist) {
		return &Requests{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := &Requests{}
	lines := bytes.Split(data, []byte("\n"))
	// What follows the last newline is nothing, or a line cut short.
	for i, line := range lines[:len(lines)-1] {
		n := i + 1
		var l logLine
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		var req proto.Message
		switch l.Method {
		case "csi.v1.CreateVolumeRequest":
			req = &csi.CreateVolumeRequest{}
		case "csi.v1.DeleteVolumeRequest":
			req = &csi.DeleteVolumeRequest{}
		case "csi.v1.GetCapacityRequest":
			req = &csi.GetCapacityRequest{}
		default:
			return nil, fmt.Errorf("%s line %d: unknown method %q", path, n, l.Method)
		}
		if err := protojson.Unmarshal(l.Request, req); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		if err := out.add(req); err != nil {
			return nil, err
		}
	}
	return out, nil
}
