// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package hostpath

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
)

// Which nodes helper pods may go to. A claim's selected-node annotation is
// written by the scheduler, or by the claim's owner: it is checked against
// the Node and against the provisioner's own placement policy (its
// --helper-node-selector and --helper-toleration) before any pod exists.
// Helper pods are pinned with spec.nodeName, past the scheduler, so this
// check is what keeps them off nodes the policy does not allow; the
// kubelet checks the node selector (and NoExecute taints) again.

// checkNode refuses (ErrNodeUnusable) a node a helper pod cannot, or may
// not, run on, naming the node and the label or taint.
// The selector and tolerations are the pod's: the flags', and a
// helperPod.yaml template's.
func (h *HelperDirs) checkNode(ctx context.Context, name string, selector map[string]string, tolerations []corev1.Toleration) error {
	node, err := h.cfg.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: node %s does not exist", ErrNodeUnusable, name)
	}
	if err != nil {
		return fmt.Errorf("reading node %s: %w", name, err)
	}
	if node.Spec.Unschedulable {
		return fmt.Errorf("%w: node %s is cordoned (spec.unschedulable)", ErrNodeUnusable, name)
	}
	if !nodeReady(node) {
		return fmt.Errorf("%w: node %s is not Ready", ErrNodeUnusable, name)
	}
	if !labels.SelectorFromSet(selector).Matches(labels.Set(node.Labels)) {
		return fmt.Errorf("%w: helper pods may not run on node %s: it does not have the labels %s of --helper-node-selector",
			ErrNodeUnusable, name, labels.Set(selector))
	}
	if taint := untolerated(klog.FromContext(ctx), node.Spec.Taints, tolerations); taint != nil {
		return fmt.Errorf("%w: helper pods may not run on node %s: its taint %s is not tolerated (add --helper-toleration=%s to allow it)",
			ErrNodeUnusable, name, taint.ToString(), taint.ToString())
	}
	return nil
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// isStateTaint: the taint mirrors what checkNode reads from the Node itself
// (Ready, spec.unschedulable); the node lifecycle controller adds and
// removes it a little later. A DaemonSet's pods tolerate these too.
func isStateTaint(key string) bool {
	switch key {
	case corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable, corev1.TaintNodeUnschedulable:
		return true
	}
	return false
}

// untolerated is the first taint that keeps pods off a node (NoSchedule,
// NoExecute) which no toleration tolerates; PreferNoSchedule only steers
// the scheduler.
func untolerated(logger klog.Logger, taints []corev1.Taint, tolerations []corev1.Toleration) *corev1.Taint {
	for i := range taints {
		taint := &taints[i]
		if taint.Effect == corev1.TaintEffectPreferNoSchedule || isStateTaint(taint.Key) {
			continue
		}
		tolerated := false
		for j := range tolerations {
			if tolerations[j].ToleratesTaint(logger, taint, false) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return taint
		}
	}
	return nil
}

// ParseToleration reads a toleration written as a taint is
// (KEY[=VALUE][:EFFECT], as kubectl taint writes them): with a value it
// tolerates only that value, without one any; without an effect, every
// effect.
func ParseToleration(s string) (corev1.Toleration, error) {
	rest, effect, hasEffect := strings.Cut(s, ":")
	key, value, hasValue := strings.Cut(rest, "=")
	t := corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists}
	if hasValue {
		t.Operator, t.Value = corev1.TolerationOpEqual, value
	}
	if hasEffect {
		t.Effect = corev1.TaintEffect(effect)
	}
	if err := validateToleration(t); err != nil {
		return corev1.Toleration{}, fmt.Errorf("toleration %q: %w", s, err)
	}
	return t, nil
}

// ValidateHelperPlacement checks the helper pods' node selector and tolerations.
// A toleration with no key would tolerate every taint: refused, so that
// tolerating control-plane nodes is always a choice written out.
func ValidateHelperPlacement(selector map[string]string, tolerations []corev1.Toleration) error {
	var errs []error
	if err := metav1validation.ValidateLabels(selector, field.NewPath("nodeSelector")).ToAggregate(); err != nil {
		errs = append(errs, err)
	}
	for _, t := range tolerations {
		if err := validateToleration(t); err != nil {
			errs = append(errs, fmt.Errorf("helper toleration %s: %w", t.Key, err))
		}
	}
	return errors.Join(errs...)
}

func validateToleration(t corev1.Toleration) error {
	var errs []error
	if t.Key == "" {
		errs = append(errs, errors.New("needs a taint key: helper pods never tolerate every taint"))
	} else if msgs := validation.IsQualifiedName(t.Key); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("key: %s", strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsValidLabelValue(t.Value); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("value: %s", strings.Join(msgs, "; ")))
	}
	switch t.Operator {
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, errors.New("operator Exists takes no value"))
		}
	case corev1.TolerationOpEqual:
	default:
		errs = append(errs, fmt.Errorf("operator %q must be Exists or Equal", t.Operator))
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		errs = append(errs, fmt.Errorf("effect %q must be NoSchedule, PreferNoSchedule or NoExecute", t.Effect))
	}
	return errors.Join(errs...)
}
