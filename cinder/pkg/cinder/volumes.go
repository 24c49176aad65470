// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Cinder volume statuses the provisioner acts on.
const (
	statusCreating      = "creating"
	statusAvailable     = "available"
	statusAttaching     = "attaching"
	statusReserved      = "reserved"
	statusInUse         = "in-use"
	statusDeleting      = "deleting"
	statusErrorDeleting = "error_deleting"
)

// errorStatuses end a wait: the volume will not become available by itself.
var errorStatuses = []string{"error", "error_restoring", "error_extending", "error_managing"}

// isNotFound reports whether Cinder answered 404.
func isNotFound(err error) bool {
	return gophercloud.ResponseCodeIs(err, http.StatusNotFound)
}

// refused reports whether Cinder turned the request down (4xx): then it did
// nothing.
func refused(err error) bool {
	var code gophercloud.ErrUnexpectedResponseCode
	return errors.As(err, &code) && code.Actual >= 400 && code.Actual < 500
}

// cinderError shortens gophercloud's error to what Cinder said: its status
// code and message.
func cinderError(err error) error {
	var code gophercloud.ErrUnexpectedResponseCode
	if !errors.As(err, &code) {
		return err
	}
	// Cinder answers {"badRequest": {"message": "...", "code": 400}}.
	var body map[string]struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(code.Body, &body) == nil {
		for _, v := range body {
			if v.Message != "" {
				return fmt.Errorf("cinder answered %d: %s", code.Actual, v.Message)
			}
		}
	}
	return fmt.Errorf("cinder answered %d to %s %s", code.Actual, code.Method, code.URL)
}

// findByName returns the volumes named name.
func findByName(ctx context.Context, c *gophercloud.ServiceClient, name string) ([]volumes.Volume, error) {
	pages, err := volumes.List(c, volumes.ListOpts{Name: name}).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	all, err := volumes.ExtractVolumes(pages)
	if err != nil {
		return nil, err
	}
	// Older Cinders treat name as a prefix or ignore it: keep exact matches.
	return slices.DeleteFunc(all, func(v volumes.Volume) bool { return v.Name != name }), nil
}

// waitAvailable polls the volume until it leaves creating: available is
// success; an error status is a permanent failure that names the status
// and, where Cinder recorded one, its user message.
func waitAvailable(ctx context.Context, c *gophercloud.ServiceClient, id string, interval time.Duration) (*volumes.Volume, error) {
	var vol *volumes.Volume
	err := wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		v, err := volumes.Get(ctx, c, id).Extract()
		if err != nil {
			return false, cinderError(err)
		}
		vol = v
		switch {
		case v.Status == statusAvailable, v.Status == statusAttaching, v.Status == statusReserved:
			return true, nil
		case slices.Contains(errorStatuses, v.Status):
			return false, &statusError{id: id, status: v.Status, message: userMessages(ctx, c, id)}
		case v.Status == statusDeleting, v.Status == statusErrorDeleting, v.Status == statusInUse:
			return false, &statusError{id: id, status: v.Status}
		}
		return false, nil
	})
	if err != nil && vol != nil && wait.Interrupted(err) {
		return vol, fmt.Errorf("cinder volume %s still %s: %w", id, vol.Status, err)
	}
	return vol, err
}

// statusError is a volume in a status it will not leave by itself.
type statusError struct {
	id, status, message string
}

func (e *statusError) Error() string {
	msg := fmt.Sprintf("cinder volume %s went to status %s", e.id, e.status)
	if e.message != "" {
		msg += ": " + e.message
	} else if slices.Contains(errorStatuses, e.status) {
		msg += " (see the cinder-scheduler and cinder-volume logs)"
	}
	return msg
}

// userMessage is one entry of Cinder's messages API.
type userMessage struct {
	ResourceUUID string `json:"resource_uuid"`
	UserMessage  string `json:"user_message"`
	CreatedAt    string `json:"created_at"`
}

// userMessages returns Cinder's user messages about a volume, oldest
// first ("create volume from backend storage:Driver failed to create the
// volume."), or "" when there are none or the messages API (microversion
// 3.3) is not there. It is best effort.
func userMessages(ctx context.Context, c *gophercloud.ServiceClient, id string) string {
	var body struct {
		Messages []userMessage `json:"messages"`
	}
	q := url.Values{"resource_uuid": {id}}
	_, err := c.Get(ctx, c.ServiceURL("messages")+"?"+q.Encode(), &body, &gophercloud.RequestOpts{
		MoreHeaders: map[string]string{"OpenStack-API-Version": "volume 3.3"},
	})
	if err != nil {
		return ""
	}
	// Older Cinders ignore the filter: keep this volume's messages.
	msgs := slices.DeleteFunc(body.Messages, func(m userMessage) bool { return m.ResourceUUID != id })
	slices.SortStableFunc(msgs, func(a, b userMessage) int { return strings.Compare(a.CreatedAt, b.CreatedAt) })
	var out []string
	for _, m := range msgs {
		if t := strings.TrimSpace(m.UserMessage); t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return strings.Join(out, "; ")
}

// waitGone polls a deleted volume until Cinder no longer knows it.
func waitGone(ctx context.Context, c *gophercloud.ServiceClient, id string, interval time.Duration) error {
	return wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		v, err := volumes.Get(ctx, c, id).Extract()
		if isNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, cinderError(err)
		}
		if v.Status == statusErrorDeleting {
			return false, &statusError{id: id, status: v.Status, message: userMessages(ctx, c, id)}
		}
		return false, nil
	})
}

// deleteVolume deletes a volume and waits until it is gone; a volume
// already gone (or going) is fine.
func deleteVolume(ctx context.Context, c *gophercloud.ServiceClient, id string, interval time.Duration) error {
	if err := volumes.Delete(ctx, c, id, nil).ExtractErr(); err != nil && !isNotFound(err) {
		// A retry may find the volume already deleting, which Cinder
		// refuses to delete again: then only wait.
		v, gerr := volumes.Get(ctx, c, id).Extract()
		if isNotFound(gerr) {
			return nil
		}
		if gerr != nil || v.Status != statusDeleting {
			return fmt.Errorf("deleting Cinder volume %s: %w", id, cinderError(err))
		}
	}
	if err := waitGone(ctx, c, id, interval); err != nil {
		return fmt.Errorf("waiting for Cinder volume %s to be deleted: %w", id, err)
	}
	return nil
}
