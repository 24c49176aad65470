// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"github.com/kubeprov/external-storage/lib/controller"
)

// stuckProvisioner never finishes a provisioning, whatever its context says:
// the kind of hang that keeps a leader which lost its Lease from stopping.
type stuckProvisioner struct {
	started chan struct{}
	release chan struct{}
}

func (p *stuckProvisioner) Provision(context.Context, controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	close(p.started)
	<-p.release
	return nil, controller.ProvisioningFinished, errors.New("stopped")
}

func (p *stuckProvisioner) Delete(context.Context, *corev1.PersistentVolume) error { return nil }

// leaderRun is Common.Run under leader election against a fake API server,
// with a provisioner that hangs.
type leaderRun struct {
	client     *fake.Clientset
	addr       string
	p          *stuckProvisioner
	renewFails atomic.Bool
	cancel     context.CancelFunc
	err        chan error
	// releaseProvisioner lets the hung provisioning end (once).
	releaseProvisioner func()
}

const leaderTestName = "example.com/test"

func startLeader(t *testing.T, healthTimeout time.Duration) *leaderRun {
	t.Helper()
	r := &leaderRun{
		client: fake.NewClientset(&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, Provisioner: leaderTestName}),
		p:      &stuckProvisioner{started: make(chan struct{}), release: make(chan struct{})},
		err:    make(chan error, 1),
	}
	r.client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if r.renewFails.Load() {
			return true, nil, errors.New("the API server is out of reach")
		}
		return false, nil, nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	_ = ln.Close()

	o := NewCommon(leaderTestName)
	o.LeaderElection, o.LeaderElectionNamespace, o.HTTPEndpoint = true, "default", r.addr
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = time.Second, 500*time.Millisecond, 100*time.Millisecond
	_, ctx := ktesting.NewTestContext(t)
	ctx, r.cancel = context.WithCancel(ctx)
	go func() {
		r.err <- o.Run(ctx, &Clients{Config: &rest.Config{}, Kube: r.client, Events: r.client}, leaderTestName, r.p, RunOptions{
			Controller: []controller.Option{controller.WithLeaderElectionHealthTimeout(healthTimeout)},
		})
	}()
	released := false
	r.releaseProvisioner = func() {
		if !released {
			released = true
			close(r.p.release)
		}
	}
	t.Cleanup(func() {
		r.cancel()
		r.releaseProvisioner()
		select {
		case err := <-r.err:
			t.Logf("Run returned: %v", err)
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after the hung operation ended")
		}
	})
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return r.holder() != "", nil
	}); err != nil {
		t.Fatalf("never became leader: %v", err)
	}
	return r
}

// holder is the Lease's holder as the API server has it.
func (r *leaderRun) holder() string {
	lease, err := r.client.CoordinationV1().Leases("default").Get(context.Background(), controller.LeaseName(leaderTestName), metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// hangOneClaim creates a claim and waits until its provisioning hangs.
func (r *leaderRun) hangOneClaim(t *testing.T) {
	t.Helper()
	className := "gold"
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: "default", UID: "uid-claim",
			Annotations: map[string]string{controller.AnnStorageProvisioner: leaderTestName}},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &className,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := r.client.CoreV1().PersistentVolumeClaims("default").Create(context.Background(), claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	<-r.p.started
}

func (r *leaderRun) probe() int {
	resp, err := http.Get("http://" + r.addr + "/healthz/leader-election")
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestLeaderElectionLivenessProbe: the path of the CSI sidecars' liveness
// probe, /healthz/leader-election, answers 200 while this instance leads and
// renews its Lease, and fails once it has not renewed it for the lease
// duration plus the health timeout while something keeps it from stopping.
func TestLeaderElectionLivenessProbe(t *testing.T) {
	r := startLeader(t, 300*time.Millisecond)
	// Longer than the lease duration plus the health timeout: renewals keep it healthy.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if code := r.probe(); code != http.StatusOK {
			t.Fatalf("leader renewing its Lease: /healthz/leader-election answered %d, want 200", code)
		}
	}

	// A claim whose provisioning hangs, then no more renewals: leadership is
	// lost, the hung operation keeps the process from stopping, and the
	// probe is what lets the kubelet restart it.
	r.hangOneClaim(t)
	r.renewFails.Store(true)
	lost := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return r.probe() == http.StatusServiceUnavailable, nil
	})
	if err != nil {
		t.Fatalf("leader that cannot renew its Lease: /healthz/leader-election still answers %d", r.probe())
	}
	if since := time.Since(lost); since < time.Second {
		t.Errorf("unhealthy %v after the renewals stopped, before the lease duration (1s) was over", since)
	}
	select {
	case err := <-r.err:
		r.err <- err // for the cleanup
		t.Fatalf("Run returned while an operation hangs: %v", err)
	default:
	}
}

// TestLeaseReleasedAfterTheWorkersStop: a graceful stop gives the Lease up
// (upstream's ReleaseLeaderElectionOnExit), but only once the last operation
// has ended, so that a standby never works beside it.
func TestLeaseReleasedAfterTheWorkersStop(t *testing.T) {
	r := startLeader(t, controller.DefaultLeaderElectionHealthTimeout)
	identity := r.holder()
	r.hangOneClaim(t)
	r.cancel()
	// Longer than the renew deadline: the stop has long begun.
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if h := r.holder(); h != identity {
			t.Fatalf("Lease holder %q while an operation still runs, want %q", h, identity)
		}
	}
	r.releaseProvisioner()
	select {
	case err := <-r.err:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		r.err <- nil // for the cleanup
		t.Fatal("Run did not return after the operation ended")
	}
	r.err <- nil // for the cleanup
	if h := r.holder(); h != "" {
		t.Errorf("Lease holder %q after a graceful stop, want it released", h)
	}
}

// leaderGauge is the value of leader_election_master_status{name=<Lease>}
// served at /metrics: "" when there is no such series.
func (r *leaderRun) leaderGauge(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + r.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	series := `leader_election_master_status{name="` + controller.LeaseName(leaderTestName) + `"} `
	for line := range strings.Lines(string(body)) {
		if value, ok := strings.CutPrefix(line, series); ok {
			return strings.TrimSpace(value)
		}
	}
	return ""
}

// TestLeaderElectionMetric: client-go's leader gauge, as the CSI sidecars
// serve it, is 1 while this instance leads and 0 once it lost the Lease.
func TestLeaderElectionMetric(t *testing.T) {
	r := startLeader(t, 300*time.Millisecond)
	if got := r.leaderGauge(t); got != "1" {
		t.Fatalf("leader_election_master_status of the leader: %q, want 1", got)
	}
	r.hangOneClaim(t) // keeps the process from stopping once the Lease is lost
	r.renewFails.Store(true)
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return r.leaderGauge(t) == "0", nil
	}); err != nil {
		t.Fatalf("leader_election_master_status after the Lease was lost: %q, want 0", r.leaderGauge(t))
	}
}
