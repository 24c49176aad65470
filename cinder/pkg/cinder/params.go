// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cinder

import (
	"fmt"
	"slices"
	"strings"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubeprov/external-storage/lib/controller"
)

// StorageClass parameters.
const (
	// ParamType is the Cinder volume type; empty means Cinder's default type.
	ParamType = "type"
	// ParamAvailability is the Cinder availability zone; absent means Cinder
	// picks (its default_availability_zone, "nova" unless configured).
	ParamAvailability = "availability"
	// ParamFSType is the filesystem the kubelet creates on the volume.
	ParamFSType = "fsType"
	// ParamRBDSecretName names the kubernetes.io/rbd Secret holding the
	// cephx key of the user Cinder reports for rbd volumes.
	ParamRBDSecretName = "rbdSecretName"
	// ParamRBDSecretNamespace is that Secret's namespace; default the claim's.
	ParamRBDSecretNamespace = "rbdSecretNamespace"
)

var knownParams = []string{ParamType, ParamAvailability, ParamFSType, ParamRBDSecretName, ParamRBDSecretNamespace}

// classParams are the checked parameters of a StorageClass.
type classParams struct {
	volumeType, availability, fsType  string
	rbdSecretName, rbdSecretNamespace string
}

// parseParams checks the class parameters; the error names the class and
// every offending key.
func parseParams(sc *storagev1.StorageClass) (classParams, error) {
	var p classParams
	var problems []string
	if err := controller.CheckParameters(sc, knownParams...); err != nil {
		problems = append(problems, err.Error())
	}
	for k, v := range sc.Parameters {
		switch k {
		case ParamType:
			p.volumeType = v
		case ParamAvailability:
			p.availability = v
		case ParamFSType:
			p.fsType = v
		case ParamRBDSecretName:
			if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
				problems = append(problems, fmt.Sprintf("%s %q is not a Secret name (%s)", k, v, strings.Join(errs, "; ")))
			}
			p.rbdSecretName = v
		case ParamRBDSecretNamespace:
			if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
				problems = append(problems, fmt.Sprintf("%s %q is not a namespace name (%s)", k, v, strings.Join(errs, "; ")))
			}
			p.rbdSecretNamespace = v
		}
	}
	if p.rbdSecretNamespace != "" && p.rbdSecretName == "" {
		problems = append(problems, fmt.Sprintf("%s is set without %s", ParamRBDSecretNamespace, ParamRBDSecretName))
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return p, fmt.Errorf("StorageClass %s: %s: fix the class (parameters cannot be edited: recreate it) and the claim is retried", sc.Name, strings.Join(problems, "; "))
	}
	return p, nil
}
