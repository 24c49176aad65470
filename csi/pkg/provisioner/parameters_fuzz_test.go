// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package provisioner

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzParameters feeds a StorageClass of up to four parameters (a key given
// twice keeps its last value). Parsing either fails with a *ParameterError
// whose every problem names a parameter of the class, or splits the class
// exactly: the driver gets every key without the reserved prefix unchanged
// and nothing else, and each secret comes from keys the class really set,
// the current spelling winning over the deprecated one and the default.
func FuzzParameters(f *testing.F) {
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3, k4, v4 string) {
		params := map[string]string{k1: v1, k2: v2, k3: v3, k4: v4}
		parsed, err := parseParameters(params)
		if err != nil {
			for _, problem := range problems(t, err) {
				if !namesParameter(problem, params) {
					t.Fatalf("problem %q names no parameter of the class %q", problem, params)
				}
			}
			return
		}

		driver := maps.Clone(params)
		maps.DeleteFunc(driver, func(k, _ string) bool { return strings.HasPrefix(k, ReservedPrefix) })
		if !maps.Equal(parsed.driver, driver) {
			t.Fatalf("driver parameters %q, want %q", parsed.driver, driver)
		}
		// At most one of the fsType keys is set, or parsing failed.
		wantFSType := params[ParamFSType]
		for k, v := range params {
			if strings.EqualFold(k, LegacyParamFSType) {
				wantFSType = v
			}
		}
		if parsed.fsType != wantFSType {
			t.Fatalf("fsType %q, want %q", parsed.fsType, wantFSType)
		}
		if !slices.IsSorted(parsed.legacyKeys) {
			t.Fatalf("legacy keys %q are not sorted", parsed.legacyKeys)
		}
		for _, k := range parsed.legacyKeys {
			if _, ok := params[k]; !ok {
				t.Fatalf("legacy key %q reported but not set", k)
			}
		}
		for kind, s := range parsed.secrets {
			if s == nil {
				continue
			}
			_, hasName := params[s.nameKey]
			_, hasNamespace := params[s.namespaceKey]
			if !hasName || !hasNamespace {
				t.Fatalf("%s from %q and %q, which the class does not both set", secretParameters[kind].what, s.nameKey, s.namespaceKey)
			}
			if _, ok := params[secretParameters[kind].name]; ok && s.nameKey != secretParameters[kind].name {
				t.Fatalf("%s from %q although the class sets %q", secretParameters[kind].what, s.nameKey, secretParameters[kind].name)
			}
		}
	})
}

// namesParameter reports whether problem quotes a key of params.
func namesParameter(problem string, params map[string]string) bool {
	for k := range params {
		if strings.Contains(problem, strconv.Quote(k)) {
			return true
		}
	}
	return false
}
