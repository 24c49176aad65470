// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubeprov/external-storage/lib/controller"
)

// auditPolicy records every request once, when its response is complete,
// with who made it and the answer's status (level Metadata: no bodies, so no
// secret reaches the log).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
  - level: Metadata
`

// AuditEvent is the part of one kube-apiserver audit log entry (audit.k8s.io/v1
// Event) that tests look at.
type AuditEvent struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	// ResponseStatus is what kube-apiserver keeps of the answer's Status
	// (at level Metadata too): code, reason, message and details.
	ResponseStatus *struct {
		Code    int    `json:"code"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
		Details *struct {
			Causes []metav1.StatusCause `json:"causes"`
		} `json:"details"`
	} `json:"responseStatus"`
	// Annotations hold the authorizer's decision
	// (authorization.k8s.io/decision: allow or forbid) and reason.
	Annotations map[string]string `json:"annotations"`
}

// Username is who the request acted as: the impersonated user if any.
func (e AuditEvent) Username() string {
	if e.ImpersonatedUser != nil {
		return e.ImpersonatedUser.Username
	}
	return e.User.Username
}

// Code is the HTTP status of the answer (0 if the log has none).
func (e AuditEvent) Code() int {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

// authorizationDecision is the audit annotation in which kube-apiserver
// records whether its authorizer allowed a request.
const authorizationDecision = "authorization.k8s.io/decision"

// RefusedInTerminatingNamespace tells whether the request was refused
// because its namespace is being deleted, not for a lack of permission: the
// authorizer allowed it, and the NamespaceLifecycle admission refused it
// (403 Forbidden "unable to create new content in namespace NS because it
// is being terminated", with the cause NamespaceTerminating in its
// details). A provisioner that records an event about a claim whose
// namespace is going away gets this answer; its RBAC lacks nothing.
func (e AuditEvent) RefusedInTerminatingNamespace() bool {
	if e.Code() != http.StatusForbidden || e.Annotations[authorizationDecision] != "allow" ||
		e.ResponseStatus.Reason != string(metav1.StatusReasonForbidden) || e.ResponseStatus.Details == nil {
		return false
	}
	return slices.ContainsFunc(e.ResponseStatus.Details.Causes, func(c metav1.StatusCause) bool {
		return c.Type == corev1.NamespaceTerminatingCause
	})
}

func (e AuditEvent) String() string {
	s := e.Verb + " " + e.RequestURI
	if e.ResponseStatus != nil {
		s += fmt.Sprintf(": %d %s", e.ResponseStatus.Code, e.ResponseStatus.Message)
	}
	return s
}

// configureAudit makes kube-apiserver write an audit log to AuditLog.
func (cp *ControlPlane) configureAudit() error {
	policy := filepath.Join(cp.Dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return err
	}
	cp.AuditLog = filepath.Join(cp.Dir, "audit.log")
	args := cp.env.ControlPlane.APIServer.Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", cp.AuditLog)
	args.Set("audit-log-format", "json")
	// blocking: each entry is written before the request returns, so once a
	// request of ours is in the log, so is everything that finished before it.
	args.Set("audit-log-mode", "blocking")
	return nil
}

// AuditEvents are the requests user made since the control plane started,
// from its audit log. It needs Options.AuditLog. It first makes a request of
// its own and waits until the log shows it, so that every request that
// finished before the call is counted.
func (cp *ControlPlane) AuditEvents(ctx context.Context, user string) ([]AuditEvent, error) {
	return cp.AuditEventsOf(ctx, func(username string) bool { return username == user })
}

// AuditEventsOf is AuditEvents for every user that match accepts (called
// with AuditEvent.Username).
func (cp *ControlPlane) AuditEventsOf(ctx context.Context, match func(username string) bool) ([]AuditEvent, error) {
	if cp.AuditLog == "" {
		return nil, errors.New("the control plane has no audit log: start it with Options.AuditLog")
	}
	marker := "kubeprov-audit-marker-" + rand.String(8)
	if _, err := cp.Client.CoreV1().Namespaces().Get(ctx, marker, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("marker request for the audit log: want NotFound, got %w", err)
	}
	var events []AuditEvent
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, DefaultProcessTimeout, true, func(context.Context) (bool, error) {
		var seen bool
		var err error
		events, seen, err = readAudit(cp.AuditLog, match, marker)
		return seen, err
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the audit log %s to show request %s: %w", cp.AuditLog, marker, err)
	}
	return events, nil
}

// Forbidden are the requests the API server refused (403) to the users
// match accepts, from the audit log (see AuditEventsOf), except those
// refused only because their namespace was being deleted
// (RefusedInTerminatingNamespace): every other 403, RBAC's above all,
// counts.
func (cp *ControlPlane) Forbidden(ctx context.Context, match func(username string) bool) ([]AuditEvent, error) {
	events, err := cp.AuditEventsOf(ctx, match)
	if err != nil {
		return nil, err
	}
	return forbidden(events), nil
}

func forbidden(events []AuditEvent) []AuditEvent {
	return slices.DeleteFunc(events, func(e AuditEvent) bool {
		return e.Code() != http.StatusForbidden || e.RefusedInTerminatingNamespace()
	})
}

// readAudit reads the audit log: the requests of the users match accepts,
// and whether a request for marker is there yet.
func readAudit(path string, match func(string) bool, marker string) (events []AuditEvent, seen bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	lines.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for lines.Scan() {
		var e AuditEvent
		if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
			// The last line may be half written.
			continue
		}
		if strings.HasSuffix(e.RequestURI, "/"+marker) {
			seen = true
		}
		if match(e.Username()) {
			events = append(events, e)
		}
	}
	return events, seen, lines.Err()
}

// ExpectNoForbidden fails the test for every request the API server refused
// (403) to user so far, from the audit log: the RBAC given to user lacks something its code
// calls. Call it after the process acting as user stopped, so that its last
// requests (a graceful stop's) are counted.
func (cp *ControlPlane) ExpectNoForbidden(t testing.TB, user string) {
	t.Helper()
	refused, err := cp.Forbidden(t.Context(), func(username string) bool { return username == user })
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range refused {
		t.Errorf("the API server refused %s: %s", user, e)
	}
}

// StopWithJournalFlush stops a provisioner gracefully (stop) right after
// it provisioned a claim (createClaim makes one; StopWithJournalFlush
// waits for its ProvisioningSucceeded event, which the library records
// right after it forgot the operation: not for the binder to bind the
// claim, which on a busy machine takes longer than the journal's lazy
// write of removals waits, nor only for the PV, whose create a stop may
// still interrupt), so that the journal's removal of that claim is still
// pending and the final flush of a graceful stop writes it: a PATCH of the journal
// ConfigMap in journalNamespace by user. The journal also writes removals by
// itself every few seconds: when that wins the race (the audit log shows no
// such PATCH), it starts the provisioner again with restart, which returns
// how to stop the new one, and retries, a bounded number of times, then
// fails the test. It returns the claims it
// created, for the caller to delete. It needs Options.AuditLog.
func (cp *ControlPlane) StopWithJournalFlush(ctx context.Context, t testing.TB, stop func() error, restart func() (stop func() error),
	createClaim func(name string) *corev1.PersistentVolumeClaim, journalNamespace, user string) []*corev1.PersistentVolumeClaim {
	t.Helper()
	const attempts = 5
	var claims []*corev1.PersistentVolumeClaim
	for i := range attempts {
		if i > 0 {
			stop = restart()
		}
		claim := createClaim(fmt.Sprintf("graceful-stop-%d", i))
		claims = append(claims, claim)
		if _, err := WaitForEvent(ctx, cp.Client, claim, controller.EventProvisioningSucceeded); err != nil {
			t.Fatal(err)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		events, err := cp.AuditEvents(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(events, func(e AuditEvent) bool {
			return e.Verb == "patch" && strings.Contains(e.RequestURI, "/namespaces/"+journalNamespace+"/configmaps/")
		}) {
			return claims
		}
	}
	t.Fatalf("in %d graceful stops right after provisioning, the provisioner never wrote its journal's last removals (no PATCH of a ConfigMap in namespace %s by %s in the audit log)",
		attempts, journalNamespace, user)
	return nil
}
