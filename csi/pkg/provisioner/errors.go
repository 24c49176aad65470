// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package provisioner

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kubeprov/external-storage/lib/controller"
)

// createState says what a failed CreateVolume means for the volume.
//
// A call that timed out, was canceled, found the driver unreachable or an
// operation already running for the name may still create the volume: the
// controller must keep asking for the same name (InBackground). An error
// that is not a gRPC status never got an answer from the driver, so the same
// holds. ResourceExhausted for a claim with a selected node means that node
// cannot host the volume (Reschedule). Every other code is the driver's final
// answer: nothing was created.
func createState(err error, selectedNode string) controller.ProvisioningState {
	st, ok := status.FromError(err)
	if !ok {
		return controller.ProvisioningInBackground
	}
	switch st.Code() {
	case codes.DeadlineExceeded, codes.Unavailable, codes.Canceled, codes.Aborted:
		return controller.ProvisioningInBackground
	case codes.ResourceExhausted:
		if selectedNode != "" {
			return controller.ProvisioningReschedule
		}
	}
	return controller.ProvisioningFinished
}

// isNotFound reports a gRPC NotFound answer.
func isNotFound(err error) bool {
	return status.Code(err) == codes.NotFound
}
