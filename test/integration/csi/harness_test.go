// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/test/backend"
	csibackend "github.com/kubeprov/external-storage/test/backend/csi"
	"github.com/kubeprov/external-storage/test/csidriver"
	"github.com/kubeprov/external-storage/test/framework"
)

const (
	// testTimeout bounds each test.
	testTimeout = 3 * time.Minute
	// journalNamespace holds the provisioners' in-flight journals.
	journalNamespace = "default"
)

var counter atomic.Int64

// uniqueName returns a name no other test of this run uses.
func uniqueName(prefix string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", prefix, counter.Add(1), hex.EncodeToString(b))
}

// Where a test's CSI driver runs. This package runs twice in make test:
//
//   - the default run (CSI_TEST_DRIVER unset): the driver is served in this
//     process (test/csidriver), its volumes in memory;
//   - the process run (CSI_TEST_DRIVER=process): the driver is a process of
//     its own (test/cmd/csidriver, built by the harness) with its volumes on
//     disk, a state file and a directory per volume, as csi-driver-host-path
//     keeps them; tests see only what that process wrote (its state file,
//     its volume directories, its request log), and it can be killed.
//
// Each test says in which runs it takes part: its driverKind.
type driverKind int

const (
	// anyDriver tests run in both runs: what they check holds for the
	// driver in this process and for a driver process with its state on
	// disk.
	anyDriver driverKind = iota
	// inProcessDriver tests run in the default run only: they inject
	// faults, stop the driver's server, or set its capacity or snapshots
	// through e.inProcess.
	inProcessDriver
	// processDriver tests run in the process run only: they kill the
	// driver process.
	processDriver
)

// driverModeEnv selects the run: "process", or unset (or "in-process") for
// the default run.
const driverModeEnv = "CSI_TEST_DRIVER"

// processRun reports whether this is the process run.
func processRun(t *testing.T) bool {
	switch v := os.Getenv(driverModeEnv); v {
	case "", "in-process":
		return false
	case "process":
		return true
	default:
		t.Fatalf("%s=%q: want process, in-process or nothing", driverModeEnv, v)
		return false
	}
}

// driverView is what tests read of the driver, wherever it runs.
type driverView interface {
	// Volumes are the volumes the driver holds, sorted by name.
	Volumes() []csidriver.Volume
	// Volume is the volume of a name.
	Volume(name string) (csidriver.Volume, bool)
	// CreateRequests and DeleteRequests are the requests received so far.
	CreateRequests() []*csi.CreateVolumeRequest
	DeleteRequests() []*csi.DeleteVolumeRequest
	// LastCreateRequest is the last CreateVolume request for a name.
	LastCreateRequest(name string) *csi.CreateVolumeRequest
}

var _ driverView = (*csidriver.Driver)(nil)

// driverFiles is the driverView of a driver process: its state file and
// request log, read at each call. A file that cannot be read fails the test
// (report) and reads as empty.
type driverFiles struct {
	stateDir, requestLog string
	report               func(format string, args ...any)
}

func (f driverFiles) Volumes() []csidriver.Volume {
	vols, err := csidriver.ReadState(f.stateDir)
	if err != nil {
		f.report("reading the driver's state: %v", err)
	}
	return vols
}

func (f driverFiles) Volume(name string) (csidriver.Volume, bool) {
	for _, v := range f.Volumes() {
		if v.Name == name {
			return v, true
		}
	}
	return csidriver.Volume{}, false
}

func (f driverFiles) requests() *csidriver.Requests {
	r, err := csidriver.ReadRequestLog(f.requestLog)
	if err != nil {
		f.report("reading the driver's request log: %v", err)
		return &csidriver.Requests{}
	}
	return r
}

func (f driverFiles) CreateRequests() []*csi.CreateVolumeRequest { return f.requests().Create }
func (f driverFiles) DeleteRequests() []*csi.DeleteVolumeRequest { return f.requests().Delete }
func (f driverFiles) LastCreateRequest(name string) *csi.CreateVolumeRequest {
	return f.requests().LastCreate(name)
}

// env is one test's driver and provisioner.
type env struct {
	t       *testing.T
	ctx     context.Context
	name    string // driver name, also the provisioner name
	ns      string
	socket  string
	backend *csibackend.Backend
	// driver is what the test reads of the driver.
	driver driverView
	// inProcess is the driver of an inProcessDriver or anyDriver test in
	// the default run; nil in the process run.
	inProcess *csidriver.Driver
	// stateDir holds the driver process's state in the process run.
	stateDir string
	prov     *framework.Process
}

// setup starts a driver with opts (its Name is generated) where kind and
// the run say, and a provisioner with the extra flags args, and waits until
// the provisioner is ready.
func setup(t *testing.T, kind driverKind, opts csidriver.Options, args ...string) *env {
	t.Helper()
	return setupNamed(t, kind, generatedDriverName(), opts, args...)
}

// setupNamed is setup with a driver of the given name, such as the CSI
// driver of an in-tree plugin (CSI migration). Tests that share a name must
// not run at the same time.
func setupNamed(t *testing.T, kind driverKind, driverName string, opts csidriver.Options, args ...string) *env {
	t.Helper()
	e := newNamedEnv(t, kind, driverName, opts)
	e.prov = e.startProvisioner(args...)
	if err := e.prov.WaitReady(e.ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	return e
}

// newEnv starts only the driver; it skips the test if kind takes no part
// in this run.
func newEnv(t *testing.T, kind driverKind, opts csidriver.Options) *env {
	t.Helper()
	return newNamedEnv(t, kind, generatedDriverName(), opts)
}

// generatedDriverName is a driver name no other test uses.
func generatedDriverName() string { return uniqueName("csi") + ".test.kubeprov.io" }

// newNamedEnv is newEnv with a driver of the given name.
func newNamedEnv(t *testing.T, kind driverKind, driverName string, opts csidriver.Options) *env {
	t.Helper()
	process := processRun(t)
	switch {
	case kind == inProcessDriver && process:
		t.Skipf("uses the driver in this process (faults, capacity, snapshots, its server stopped): runs without %s=process", driverModeEnv)
	case kind == processDriver && !process:
		t.Skipf("kills the driver process: runs with %s=process, as make test does", driverModeEnv)
	}
	ctx := framework.TestContext(t, testTimeout)
	b, err := csibackend.NewWithOptions(ctx, backend.Config{
		ControlPlane:    cp,
		Namespace:       journalNamespace,
		ProvisionerName: driverName,
		Dir:             t.TempDir(),
		// Failing claims retried every 2 s would otherwise exhaust the
		// default budget of 5 writes a second and delay the events tested.
		ExtraArgs: []string{"--kube-api-qps=100", "--kube-api-burst=200", "-v=5"},
		Log:       t.Logf,
	}, csibackend.Options{Driver: opts, BuildFlags: []string{"-race"}, Process: process})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	e := &env{
		t: t, ctx: ctx, name: b.ProvisionerName(), ns: cp.CreateTestNamespace(t, "csi"),
		socket: b.Socket(), backend: b, inProcess: b.Driver(), stateDir: b.StateDir(),
	}
	e.driver = e.view()
	return e
}

// view is the driverView of the env's driver, failing e.t when it cannot be
// read.
func (e *env) view() driverView {
	if e.inProcess != nil {
		return e.inProcess
	}
	return driverFiles{stateDir: e.stateDir, requestLog: e.backend.RequestLog(), report: e.t.Errorf}
}

// on returns the env for a subtest: helpers fail the test they run in.
func (e *env) on(t *testing.T) *env {
	c := *e
	c.t = t
	c.driver = c.view()
	return &c
}

// startProvisioner runs csi-provisioner, built with the race detector, for
// the env's driver with the extra flags, and returns once it has started.
// It is stopped when the test ends, which fails if it found a data race.
func (e *env) startProvisioner(args ...string) *framework.Process {
	e.t.Helper()
	return e.startReplica(backend.Replica{Args: args})
}

// startReplica is startProvisioner with the replica's environment too.
func (e *env) startReplica(rep backend.Replica) *framework.Process {
	t := e.t
	t.Helper()
	rep.Identity, rep.NoWait = strconv.FormatInt(counter.Add(1), 10), true
	p, err := e.backend.StartReplica(e.ctx, rep)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-p.Exited(): // killed, or exited as the test expected
		default:
			if err := p.Stop(); err != nil {
				t.Errorf("stopping csi-provisioner: %v", err)
			}
		}
		if p.HasLog("WARNING: DATA RACE") {
			t.Errorf("csi-provisioner found a data race:\n%s", p.Log())
		} else if t.Failed() {
			t.Logf("csi-provisioner log (%s), last lines:\n%s", p.LogPath, p.LogTail(80))
		}
	})
	return p
}

// exitError waits until the provisioner exits and returns its exit error.
func exitError(ctx context.Context, p *framework.Process) error {
	select {
	case <-p.Exited():
		return p.Stop()
	case <-ctx.Done():
		return fmt.Errorf("csi-provisioner still running: %w", ctx.Err())
	}
}

// readyz returns the status code and body of /readyz?verbose.
func readyz(ctx context.Context, p *framework.Process) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.Endpoint+"/readyz?verbose", nil)
	if err != nil {
		return 0, "", err
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = rsp.Body.Close() }()
	body, err := io.ReadAll(rsp.Body)
	return rsp.StatusCode, string(body), err
}

// waitNotReady waits until /readyz answers not ready.
func waitNotReady(ctx context.Context, p *framework.Process) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return !p.Ready(ctx), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for /readyz to answer not ready: %w", err)
	}
	return nil
}

// createClass creates a StorageClass of the env's driver and deletes it
// when the test ends.
func (e *env) createClass(params map[string]string, mutate ...func(*storagev1.StorageClass)) *storagev1.StorageClass {
	e.t.Helper()
	class := framework.NewStorageClass(uniqueName("csi"), e.name, params)
	for _, m := range mutate {
		m(class)
	}
	return cp.CreateTestStorageClass(e.t, class)
}

// createClaim creates a claim of the class in the env's namespace.
func (e *env) createClaim(class, size string, mutate ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	e.t.Helper()
	claim := framework.NewPVC(e.ns, uniqueName("claim"), class, size)
	for _, m := range mutate {
		m(claim)
	}
	claim, err := cp.Client.CoreV1().PersistentVolumeClaims(e.ns).Create(e.ctx, claim, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return claim
}

// bound waits until the claim is bound and returns it with its PV.
func (e *env) bound(claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	e.t.Helper()
	claim, pv, err := framework.WaitForPVCBound(e.ctx, cp.Client, claim.Namespace, claim.Name)
	if err != nil {
		e.t.Fatal(err)
	}
	return claim, pv
}

// deleteClaim deletes a claim and waits until it is gone.
func (e *env) deleteClaim(claim *corev1.PersistentVolumeClaim) {
	e.t.Helper()
	if err := cp.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).Delete(e.ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	if err := framework.WaitForPVCDeleted(e.ctx, cp.Client, claim.Namespace, claim.Name); err != nil {
		e.t.Fatal(err)
	}
}

// event waits for an event about obj with the reason whose message contains
// every one of parts, and returns it.
func (e *env) event(obj metav1.Object, reason string, parts ...string) *corev1.Event {
	e.t.Helper()
	ev, err := waitForEvent(e.ctx, obj, reason, parts...)
	if err != nil {
		e.t.Fatal(err)
	}
	return ev
}

func waitForEvent(ctx context.Context, obj metav1.Object, reason string, parts ...string) (*corev1.Event, error) {
	var found *corev1.Event
	var seen []string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := cp.Client.CoreV1().Events(obj.GetNamespace()).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		seen = seen[:0]
		for i, ev := range list.Items {
			if ev.InvolvedObject.UID != obj.GetUID() {
				continue
			}
			seen = append(seen, ev.Reason+": "+ev.Message)
			if ev.Reason == reason && containsAll(ev.Message, parts) {
				found = &list.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("no %s event about %s containing %q: %w; events seen:\n%s", reason, obj.GetName(), parts, err, strings.Join(seen, "\n"))
	}
	return found, nil
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// eventually waits until cond holds.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	err := wait.PollUntilContextCancel(e.ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		e.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// volumeCount is how many volumes the driver holds.
func (e *env) volumeCount() int { return len(e.driver.Volumes()) }

// noVolumeLeft waits until the driver holds no volume, and a driver process
// has no volume directory left: every asset was deleted.
func (e *env) noVolumeLeft() {
	e.t.Helper()
	e.eventually("the driver to hold no volume", func() bool { return e.volumeCount() == 0 })
	if e.stateDir != "" {
		var last error
		err := wait.PollUntilContextCancel(e.ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
			last = csidriver.CheckStateDir(e.stateDir)
			return last == nil, nil
		})
		if err != nil {
			e.t.Fatalf("waiting for no volume directory to be left: %v: %v", err, last)
		}
	}
}

// pvName is the PV (and volume) name of a claim with the default flags.
func pvName(claim *corev1.PersistentVolumeClaim) string { return "pvc-" + string(claim.UID) }

// pvGone waits until the PV is deleted.
func (e *env) pvGone(name string) {
	e.t.Helper()
	if err := framework.WaitForPVDeleted(e.ctx, cp.Client, name); err != nil {
		e.t.Fatal(err)
	}
}

// pvAbsent reports whether no PV has the name right now.
func pvAbsent(ctx context.Context, name string) (bool, error) {
	_, err := cp.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}
