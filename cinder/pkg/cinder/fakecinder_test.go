// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	th "github.com/gophercloud/gophercloud/v2/testhelper"
	"github.com/gophercloud/gophercloud/v2/testhelper/client"
)

// fakeCinder is a stateful fake of the parts of the Cinder v3 API the
// provisioner uses, served by gophercloud's fake HTTP server. It records
// every call and can be told to fail any of them.
type fakeCinder struct {
	t      *testing.T
	server th.FakeServer

	mu      sync.Mutex
	nextID  int
	volumes map[string]*fakeVolume
	calls   []string
	// connectors holds the connector of every initialize and terminate call.
	connectors []map[string]any
	creates    []map[string]any

	// fail maps a call name to the HTTP status it answers with.
	fail map[string]int
	// hangUp makes a call close the connection without an answer.
	hangUp map[string]bool
	// createdStatus is the status a new volume reaches after creatingPolls
	// reads in "creating"; default available.
	createdStatus string
	creatingPolls int
	// createStuck makes new volumes stuck (see fakeVolume.stuck).
	createStuck bool
	// connection is the connection_info answered to initialize.
	connection map[string]any
	messages   []userMessage
	// defaultZone is the zone of volumes created without one, as Cinder's
	// default_availability_zone; zones maps a requested zone to the one
	// the volume gets (allow_availability_zone_fallback).
	defaultZone string
	zones       map[string]string
	// afterList runs once, after the next list is answered, with f.mu
	// held: what Cinder does between a list and the next call.
	afterList func(f *fakeCinder)
}

type fakeVolume struct {
	ID       string            `json:"id"`
	Name     string            `json:"name"`
	Size     int               `json:"size"`
	Status   string            `json:"status"`
	Type     string            `json:"volume_type"`
	Zone     string            `json:"availability_zone"`
	Metadata map[string]string `json:"metadata"`
	// CreatedAt is as Cinder writes it (cinderTime); create sets it.
	CreatedAt string `json:"created_at,omitempty"`
	// neverScheduled: cinder-api wrote the volume but no scheduler ever
	// saw it (no host), so Cinder accepts a plain delete in any status.
	neverScheduled bool
	// stuck: the volume stays creating whatever creatingPolls says.
	stuck bool
	polls int
}

// cinderTime formats t as Cinder does: UTC, microseconds, no zone.
func cinderTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000")
}

func newFakeCinder(t *testing.T) *fakeCinder {
	f := &fakeCinder{
		t:             t,
		server:        th.SetupHTTP(),
		volumes:       map[string]*fakeVolume{},
		fail:          map[string]int{},
		hangUp:        map[string]bool{},
		createdStatus: statusAvailable,
		defaultZone:   "nova",
		zones:         map[string]string{},
	}
	t.Cleanup(f.server.Teardown)
	mux := f.server.Mux
	mux.HandleFunc("GET /volumes/detail", f.list)
	mux.HandleFunc("POST /volumes", f.create)
	mux.HandleFunc("GET /volumes/{id}", f.get)
	mux.HandleFunc("DELETE /volumes/{id}", f.delete)
	mux.HandleFunc("POST /volumes/{id}/action", f.action)
	mux.HandleFunc("GET /messages", f.listMessages)
	return f
}

func (f *fakeCinder) client() *gophercloud.ServiceClient {
	return client.ServiceClient(f.server)
}

// addVolume puts a volume into the fake as if an earlier attempt made it.
func (f *fakeCinder) addVolume(v fakeVolume) *fakeVolume {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v.ID == "" {
		f.nextID++
		v.ID = fmt.Sprintf("vol-%d", f.nextID)
	}
	f.volumes[v.ID] = &v
	return &v
}

// actions returns the recorded calls other than status reads.
func (f *fakeCinder) actions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(f.calls), func(c string) bool { return c == "get" || c == "messages" })
}

// resetCalls forgets the calls recorded so far.
func (f *fakeCinder) resetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

func (f *fakeCinder) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.volumes)
}

func (f *fakeCinder) volume(id string) *fakeVolume {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.volumes[id]; ok {
		c := *v
		return &c
	}
	return nil
}

// record notes a call and answers it with an injected failure if there is
// one; it returns false when the handler must stop. Called with f.mu held.
func (f *fakeCinder) record(w http.ResponseWriter, name string) bool {
	f.calls = append(f.calls, name)
	if f.hangUp[name] {
		hj, ok := w.(http.Hijacker)
		if !ok {
			f.t.Errorf("fake cinder: cannot hang up")
			return false
		}
		conn, _, err := hj.Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return false
	}
	if code := f.fail[name]; code != 0 {
		writeJSON(w, code, map[string]any{"badRequest": map[string]any{"code": code, "message": "injected failure of " + name}})
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

func notFound(w http.ResponseWriter, id string) {
	writeJSON(w, http.StatusNotFound, map[string]any{"itemNotFound": map[string]any{"code": 404, "message": "Volume " + id + " could not be found."}})
}

func (f *fakeCinder) list(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.record(w, "list") {
		return
	}
	name := r.URL.Query().Get("name")
	out := []fakeVolume{}
	for _, v := range f.volumes {
		if name == "" || v.Name == name {
			out = append(out, *v)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"volumes": out})
	if hook := f.afterList; hook != nil {
		f.afterList = nil
		hook(f)
	}
}

func (f *fakeCinder) create(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Volume map[string]any `json:"volume"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		f.t.Errorf("fake cinder: create body: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates = append(f.creates, body.Volume)
	if !f.record(w, "create") {
		return
	}
	f.nextID++
	v := &fakeVolume{ID: fmt.Sprintf("vol-%d", f.nextID), Status: "creating", Metadata: map[string]string{}, CreatedAt: cinderTime(time.Now()), stuck: f.createStuck}
	v.Name, _ = body.Volume["name"].(string)
	size, _ := body.Volume["size"].(float64)
	v.Size = int(size)
	v.Type, _ = body.Volume["volume_type"].(string)
	v.Zone, _ = body.Volume["availability_zone"].(string)
	if z, ok := f.zones[v.Zone]; ok {
		v.Zone = z
	}
	if v.Zone == "" {
		v.Zone = f.defaultZone
	}
	if md, ok := body.Volume["metadata"].(map[string]any); ok {
		for k, val := range md {
			v.Metadata[k], _ = val.(string)
		}
	}
	f.volumes[v.ID] = v
	writeJSON(w, http.StatusAccepted, map[string]any{"volume": v})
}

func (f *fakeCinder) get(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.record(w, "get") {
		return
	}
	id := r.PathValue("id")
	v, ok := f.volumes[id]
	if !ok {
		notFound(w, id)
		return
	}
	switch v.Status {
	case "creating":
		if !v.stuck && v.polls >= f.creatingPolls {
			v.Status = f.createdStatus
		}
		v.polls++
	case statusDeleting:
		// Gone after one more read in "deleting".
		delete(f.volumes, id)
	}
	writeJSON(w, http.StatusOK, map[string]any{"volume": v})
}

func (f *fakeCinder) delete(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.record(w, "delete") {
		return
	}
	id := r.PathValue("id")
	v, ok := f.volumes[id]
	switch {
	case !ok:
		notFound(w, id)
	case v.neverScheduled:
		// Cinder destroys the row at once.
		delete(f.volumes, id)
		w.WriteHeader(http.StatusAccepted)
	case v.Status != statusAvailable && v.Status != "error" && v.Status != statusErrorDeleting:
		writeJSON(w, http.StatusBadRequest, map[string]any{"badRequest": map[string]any{"code": 400,
			"message": "Invalid volume: Volume status must be available or error or error_restoring or error_extending or error_managing and must not be migrating, attached, belong to a group, have snapshots, awaiting a transfer, or be disassociated from snapshots after volume transfer."}})
	default:
		v.Status = statusDeleting
		w.WriteHeader(http.StatusAccepted)
	}
}

func (f *fakeCinder) action(w http.ResponseWriter, r *http.Request) {
	// {"os-reserve": {}}, {"os-force_delete": ""}, ...
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		f.t.Errorf("fake cinder: action body: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var name string
	for k := range body {
		name = k
	}
	name = map[string]string{
		"os-reserve": "reserve", "os-unreserve": "unreserve",
		"os-initialize_connection": "initialize", "os-terminate_connection": "terminate",
		"os-force_delete": "force-delete",
	}[name]
	if name == "initialize" || name == "terminate" {
		args, _ := body["os-"+name+"_connection"].(map[string]any)
		conn, _ := args["connector"].(map[string]any)
		f.connectors = append(f.connectors, conn)
	}
	if !f.record(w, name) {
		return
	}
	id := r.PathValue("id")
	v, ok := f.volumes[id]
	if !ok {
		notFound(w, id)
		return
	}
	bad := func(msg string) {
		writeJSON(w, http.StatusBadRequest, map[string]any{"badRequest": map[string]any{"code": 400, "message": msg}})
	}
	switch name {
	case "reserve":
		if v.Status != statusAvailable {
			bad("Invalid volume: Volume status must be available to reserve, but the status is " + v.Status + ".")
			return
		}
		v.Status = statusAttaching
		w.WriteHeader(http.StatusAccepted)
	case "unreserve":
		if v.Status == statusAttaching {
			v.Status = statusAvailable
		}
		w.WriteHeader(http.StatusAccepted)
	case "initialize":
		writeJSON(w, http.StatusOK, map[string]any{"connection_info": f.connection})
	case "terminate":
		w.WriteHeader(http.StatusAccepted)
	case "force-delete":
		// Any status but attached.
		if v.Status == statusInUse {
			bad("Invalid volume: Volume must not be attached.")
			return
		}
		v.Status = statusDeleting
		w.WriteHeader(http.StatusAccepted)
	default:
		bad("unknown action")
	}
}

func (f *fakeCinder) listMessages(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.record(w, "messages") {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": f.messages})
}
