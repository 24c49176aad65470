// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"fmt"
	"io"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ScrapeMetrics reads the metric families a process serves at url, as
// Prometheus would.
func ScrapeMetrics(url string) (map[string]*dto.MetricFamily, error) {
	rsp, err := http.Get(url) //nolint:gosec,noctx // a loopback URL of a test's own process
	if err != nil {
		return nil, err
	}
	defer func() { _ = rsp.Body.Close() }()
	if rsp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(rsp.Body)
		return nil, fmt.Errorf("GET %s: %d %s", url, rsp.StatusCode, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(rsp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", url, err)
	}
	return families, nil
}

// MetricValue is the value of the gauge or counter of family name whose
// labels include labels, or an error naming what is missing.
func MetricValue(families map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, error) {
	f := families[name]
	if f == nil {
		return 0, fmt.Errorf("no metric %s", name)
	}
	for _, m := range f.Metric {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), nil
		case m.Counter != nil:
			return m.Counter.GetValue(), nil
		}
	}
	return 0, fmt.Errorf("no series of %s with labels %v", name, labels)
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	found := 0
	for _, l := range m.Label {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			found++
		}
	}
	return found == len(want)
}
