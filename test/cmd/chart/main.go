// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Command chart packages a Helm chart directory into <name>-<version>.tgz,
// as helm package --version --app-version does, with Helm's own library
// (no helm binary needed): make chart runs it for every chart under
// charts/, with the versions of the module's release tag.
//
//	go run ./cmd/chart --version 0.2.0 --app-version v0.2.0 --out ../_output/charts ../charts/hostpath
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/Masterminds/semver/v3"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("chart", flag.ContinueOnError)
	version := fs.String("version", "", "Chart version (SemVer 2, no leading v); empty keeps Chart.yaml's.")
	appVersion := fs.String("app-version", "", "appVersion, the image tag the chart runs by default; empty keeps Chart.yaml's.")
	out := fs.String("out", ".", "Directory the .tgz is written to.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("want one chart directory")
	}
	ch, err := loader.LoadDir(fs.Arg(0))
	if err != nil {
		return err
	}
	if err := setVersions(ch, *version, *appVersion); err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	path, err := chartutil.Save(ch, *out)
	if err != nil {
		return err
	}
	fmt.Println(path)
	return nil
}

// setVersions sets the chart's version and appVersion where given; an
// appVersion with "+" (a development build) gets "-" instead, as its image
// tag does (hack/build.make).
func setVersions(ch *chart.Chart, version, appVersion string) error {
	if version != "" {
		if strings.HasPrefix(version, "v") {
			return fmt.Errorf("--version %s: a chart version has no leading v", version)
		}
		if _, err := semver.StrictNewVersion(version); err != nil {
			return fmt.Errorf("--version %s: %w", version, err)
		}
		ch.Metadata.Version = version
	}
	if appVersion != "" {
		ch.Metadata.AppVersion = strings.ReplaceAll(appVersion, "+", "-")
	}
	return ch.Validate()
}
