// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// labelsValue is a flag of labels written as the CSI sidecars write
// --leader-election-labels: comma-separated key:value pairs. Each use of
// the flag adds to the labels.
type labelsValue struct{ m *map[string]string }

func newLabelsValue(m *map[string]string) *labelsValue { return &labelsValue{m: m} }

func (v *labelsValue) Set(s string) error {
	if *v.m == nil {
		*v.m = map[string]string{}
	}
	for item := range strings.SplitSeq(s, ",") {
		key, value, ok := strings.Cut(item, ":")
		if !ok || strings.Contains(value, ":") {
			return fmt.Errorf("malformed label %q: want key:value", item)
		}
		(*v.m)[key] = value
	}
	return nil
}

func (v *labelsValue) String() string {
	if v.m == nil || len(*v.m) == 0 {
		return ""
	}
	var items []string
	for _, k := range slices.Sorted(maps.Keys(*v.m)) {
		items = append(items, k+":"+(*v.m)[k])
	}
	return strings.Join(items, ",")
}

func (v *labelsValue) Type() string { return "key:value,..." }
