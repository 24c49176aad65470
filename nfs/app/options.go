// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package app is the nfs-provisioner command: its options and how it runs.
package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kubeprov/external-storage/lib/cli"
	"github.com/kubeprov/external-storage/nfs/pkg/ganesha"
	"github.com/kubeprov/external-storage/nfs/pkg/server"
	"github.com/kubeprov/external-storage/nfs/pkg/subdir"
)

// Modes.
const (
	ModeServer = "server"
	ModeSubdir = "subdir"
)

// Defaults of the options.
const (
	DefaultProvisioner   = "kubeprov.io/nfs"
	DefaultMode          = ModeServer
	DefaultExportRoot    = "/export"
	DefaultGaneshaConfig = "/export/ganesha.conf"
	DefaultGaneshaLog    = "/dev/stderr"
	DefaultGracePeriod   = 90
	DefaultNFSRoot       = "/persistentvolumes"
	// provisionerNameEnv is the former subdir provisioner's variable for the
	// provisioner name; PROVISIONER (from --provisioner) wins over it.
	provisionerNameEnv = "PROVISIONER_NAME"
	// leaderElectionEnv is the former subdir provisioner's variable for
	// leader election; LEADER_ELECTION (from --leader-election) wins over it.
	leaderElectionEnv = "ENABLE_LEADER_ELECTION"
)

// safePath is what the export root may look like: it is written unquoted
// into Ganesha's configuration and xfs_quota commands.
var safePath = regexp.MustCompile(`^/[A-Za-z0-9._/+-]*$`)

// safeClients is what --export-subnet may look like: it is written
// unquoted into Ganesha's configuration.
var safeClients = regexp.MustCompile(`^[A-Za-z0-9.:/*_, -]+$`)

// Options of nfs-provisioner.
type Options struct {
	cli.Common

	Mode string

	// Server mode.
	// RunServer is true by default, as in the classic nfs-provisioner, whose
	// manifests do not pass it.
	RunServer      bool
	ExportRoot     string
	GaneshaConfig  string
	GaneshaLog     string
	BindAddress    string
	GracePeriod    int
	ExportSubnet   string
	MaxExports     int
	ServerHostname string
	ServiceName    string
	PodIP          string
	NodeName       string
	EnableXFSQuota bool
	// DeviceBasedFsids is the classic --device-based-fsids: Ganesha's
	// fsid_device, only when given (Ganesha's default, false, otherwise).
	DeviceBasedFsids bool

	// Subdir mode.
	NFSRoot   string
	NFSServer string
	NFSPath   string
	// Shares are the --share values: further shares a class selects with
	// its share parameter.
	Shares []string
	// StrictParameters keeps the stricter pathPattern and onDelete rules.
	StrictParameters bool
	// NFSDefaultMode, NFSDefaultUID and NFSDefaultGID are the mode and owner
	// of new directories (NFS_DEFAULT_MODE, ... as in
	// nfs-subdir-external-provisioner); "" leaves them as they are.
	NFSDefaultMode, NFSDefaultUID, NFSDefaultGID string

	fs *pflag.FlagSet
}

// NewOptions returns the options with their defaults.
func NewOptions() *Options {
	return &Options{
		Common:        cli.NewCommon(DefaultProvisioner),
		Mode:          DefaultMode,
		ExportRoot:    DefaultExportRoot,
		GaneshaConfig: DefaultGaneshaConfig,
		GaneshaLog:    DefaultGaneshaLog,
		GracePeriod:   DefaultGracePeriod,
		ExportSubnet:  ganesha.DefaultClients,
		RunServer:     true,
		MaxExports:    server.DefaultMaxExports,
		NFSRoot:       DefaultNFSRoot,
	}
}

// AddFlags adds every flag to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.fs = fs
	o.Common.AddFlags(fs)
	fs.StringVar(&o.Mode, "mode", o.Mode, "server: run exports of an NFS-Ganesha beside this process; subdir: carve directories out of an existing NFS export.")

	fs.BoolVar(&o.RunServer, "run-server", o.RunServer, "Server mode: start and supervise rpcbind, the system D-Bus and ganesha.nfsd (reusing rpcbind and D-Bus if they already run); false uses a Ganesha that runs already.")
	fs.StringVar(&o.ExportRoot, "export-root", o.ExportRoot, "Server mode: directory holding one directory per volume, and the identity file.")
	fs.StringVar(&o.GaneshaConfig, "ganesha-config", o.GaneshaConfig, "Server mode: NFS-Ganesha configuration file; written with defaults if missing, EXPORT blocks are added and removed.")
	fs.StringVar(&o.GaneshaLog, "ganesha-log", o.GaneshaLog, "Server mode with --run-server: ganesha.nfsd's log file.")
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "Server mode: address ganesha.nfsd listens on, written into a new configuration file; empty means all.")
	fs.IntVar(&o.GracePeriod, "grace-period", o.GracePeriod, "Server mode: NFSv4 grace period in seconds, written into a new configuration file.")
	fs.StringVar(&o.ExportSubnet, "export-subnet", o.ExportSubnet, "Server mode: clients allowed to mount the exports (Ganesha Clients syntax: subnet, host or list); * means all.")
	fs.IntVar(&o.MaxExports, "max-exports", o.MaxExports, "Server mode: refuse new volumes beyond this many exports; negative means no limit.")
	fs.StringVar(&o.ServerHostname, "server-hostname", o.ServerHostname, "Server mode: address clients mount from; default the Service's ClusterIP (--service-name), else --pod-ip, else --node-name.")
	fs.StringVar(&o.ServiceName, "service-name", o.ServiceName, "Server mode: Service in front of this server (in POD_NAMESPACE) whose ClusterIP clients mount from.")
	fs.StringVar(&o.PodIP, "pod-ip", o.PodIP, "Server mode: this pod's IP (from the downward API), used as server address without --service-name.")
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "Server mode: this node's name, used as server address without --service-name and --pod-ip (host network).")
	fs.BoolVar(&o.DeviceBasedFsids, "device-based-fsids", o.DeviceBasedFsids,
		"Server mode: Ganesha's fsid_device (file handles from the export volume's device numbers, which change when it is attached elsewhere), written into a new configuration file; with an existing one it must agree with the file. Unset: Ganesha's default, false.")
	fs.BoolVar(&o.EnableXFSQuota, "enable-xfs-quota", o.EnableXFSQuota, "Server mode: limit each volume to its request with XFS project quota (the export root must be XFS mounted with prjquota).")

	fs.StringVar(&o.NFSRoot, "nfs-root", o.NFSRoot, "Subdir mode: where the existing export is mounted in this pod.")
	fs.StringVar(&o.NFSServer, "nfs-server", o.NFSServer, "Subdir mode: server of the existing export, as clients reach it.")
	fs.StringVar(&o.NFSPath, "nfs-path", o.NFSPath, "Subdir mode: path of the existing export on --nfs-server.")
	fs.StringArrayVar(&o.Shares, "share", o.Shares,
		"Subdir mode: a further export that classes select with the parameter share: name=NAME,server=SERVER,path=PATH,root=MOUNT-POINT. Repeat the flag, or separate shares with ; (one SHARE variable).")
	fs.BoolVar(&o.StrictParameters, "strict-parameters", o.StrictParameters,
		"Subdir mode: refuse claims whose pathPattern reads a label or annotation they lack, or that expands to an empty or . component, and classes whose onDelete and archiveOnDelete contradict each other (by default, as in nfs-subdir-external-provisioner, a missing value is empty and onDelete wins).")
	o.addOwnershipFlags(fs)
	fs.SetNormalizeFunc(classicNames(fs.GetNormalizeFunc()))
}

// classicNames makes the classic nfs-provisioner's --leader-elect another
// spelling of --leader-election (so -leader-elect, --leader-elect=false and
// LEADER_ELECTION all set the one flag), after next.
func classicNames(next func(*pflag.FlagSet, string) pflag.NormalizedName) func(*pflag.FlagSet, string) pflag.NormalizedName {
	return func(fs *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "leader-elect" {
			name = "leader-election"
		}
		return next(fs, name)
	}
}

// addOwnershipFlags adds the flags (and so the variables) of
// nfs-subdir-external-provisioner's directory defaults.
func (o *Options) addOwnershipFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.NFSDefaultMode, "nfs-default-mode", o.NFSDefaultMode,
		"Subdir mode: octal mode of new volume directories (default 777, or 2770 with the class's gid); a claim's annotation "+subdir.AnnDirectoryMode+" wins.")
	fs.StringVar(&o.NFSDefaultUID, "nfs-default-uid", o.NFSDefaultUID,
		"Subdir mode: numeric owner of new volume directories (default: the provisioner's, root); a claim's annotation "+subdir.AnnDirectoryUID+" wins.")
	fs.StringVar(&o.NFSDefaultGID, "nfs-default-gid", o.NFSDefaultGID,
		"Subdir mode: numeric group of new volume directories (default: the provisioner's, root); the class's gid and a claim's annotation "+subdir.AnnDirectoryGID+" win.")
}

// Complete reads the former subdir provisioner's variables for what our own
// flags (or their variables) did not give: PROVISIONER_NAME for
// --provisioner, ENABLE_LEADER_ELECTION for --leader-election.
func (o *Options) Complete() error {
	if err := o.Common.Complete(); err != nil {
		return err
	}
	if o.fs == nil {
		return nil
	}
	if !o.fs.Changed("provisioner") {
		if v := os.Getenv(provisionerNameEnv); v != "" {
			o.Provisioner = v
		}
	}
	if !o.fs.Changed("leader-election") {
		if v := os.Getenv(leaderElectionEnv); v != "" {
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("environment variable %s (--leader-election) must be true or false, not %q", leaderElectionEnv, v)
			}
			o.LeaderElection = b
		}
	}
	return nil
}

// ParseShares parses --share values: each is one or more shares separated
// by ";", a share being comma-separated key=value pairs with the keys name,
// server, path and root, all required. Unknown keys are errors.
func ParseShares(values []string) ([]subdir.Share, error) {
	var shares []subdir.Share
	var errs []error
	for _, v := range values {
		for one := range strings.SplitSeq(v, ";") {
			one = strings.TrimSpace(one)
			if one == "" {
				continue
			}
			s, err := parseShare(one)
			if err != nil {
				errs = append(errs, fmt.Errorf("--share %q: %w", one, err))
				continue
			}
			shares = append(shares, s)
		}
	}
	return shares, errors.Join(errs...)
}

func parseShare(v string) (subdir.Share, error) {
	var s subdir.Share
	seen := map[string]bool{}
	for kv := range strings.SplitSeq(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return s, fmt.Errorf("%q is not key=value", kv)
		}
		if seen[k] {
			return s, fmt.Errorf("%s given twice", k)
		}
		seen[k] = true
		switch k {
		case "name":
			s.Name = val
		case "server":
			s.Server = val
		case "path":
			s.Path = val
		case "root":
			s.Root = val
		default:
			return s, fmt.Errorf("unknown key %q; the keys are name, server, path and root", k)
		}
	}
	var missing []string
	for _, k := range []string{"name", "server", "path", "root"} {
		if !seen[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return s, fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	return s, nil
}

// ownership parses --nfs-default-mode, -uid and -gid, naming the one at
// fault; "" leaves a field unset.
func (o *Options) ownership() (subdir.Ownership, error) {
	var owner subdir.Ownership
	var errs []error
	bad := func(flag string, err error) {
		errs = append(errs, fmt.Errorf("--%s (%s): %w", flag, cli.EnvName(flag), err))
	}
	if o.NFSDefaultMode != "" {
		if m, err := subdir.ParseMode(o.NFSDefaultMode); err != nil {
			bad("nfs-default-mode", err)
		} else {
			owner.Mode = &m
		}
	}
	for _, f := range []struct {
		flag, v string
		dst     **int
	}{{"nfs-default-uid", o.NFSDefaultUID, &owner.UID}, {"nfs-default-gid", o.NFSDefaultGID, &owner.GID}} {
		if f.v == "" {
			continue
		}
		if n, err := subdir.ParseID(f.v); err != nil {
			bad(f.flag, err)
		} else {
			*f.dst = &n
		}
	}
	return owner, errors.Join(errs...)
}

// SubdirConfig is the subdir provisioner's configuration from the options.
func (o *Options) SubdirConfig() (subdir.Config, error) {
	shares, err := ParseShares(o.Shares)
	if err != nil {
		return subdir.Config{}, err
	}
	owner, err := o.ownership()
	if err != nil {
		return subdir.Config{}, err
	}
	cfg := subdir.Config{Shares: shares, Strict: o.StrictParameters, Ownership: owner}
	if o.NFSServer != "" || o.NFSPath != "" || len(shares) == 0 {
		cfg.Root, cfg.Server, cfg.Path = o.NFSRoot, o.NFSServer, o.NFSPath
	}
	return cfg, nil
}

// given reports whether a flag was set on the command line or from the
// environment.
func (o *Options) given(flag string) bool {
	return o.fs != nil && o.fs.Changed(flag)
}

// Validate checks the options, naming the flag at fault.
func (o *Options) Validate() error {
	errs := []error{o.Common.Validate()}
	switch o.Mode {
	case ModeServer:
		errs = append(errs, o.validateServer()...)
	case ModeSubdir:
		errs = o.validateSubdir(errs)
	default:
		errs = append(errs, fmt.Errorf("--mode must be %q or %q, not %q", ModeServer, ModeSubdir, o.Mode))
	}
	return errors.Join(errs...)
}

// validateServer returns the problems of the server mode's options.
func (o *Options) validateServer() []error {
	var errs []error
	if !safePath.MatchString(o.ExportRoot) {
		errs = append(errs, fmt.Errorf("--export-root %q must be an absolute path of letters, digits and . _ / + - only", o.ExportRoot))
	}
	if !filepath.IsAbs(o.GaneshaConfig) {
		errs = append(errs, fmt.Errorf("--ganesha-config %q must be an absolute path", o.GaneshaConfig))
	}
	if o.GracePeriod < 0 {
		errs = append(errs, errors.New("--grace-period must not be negative"))
	}
	if !safeClients.MatchString(o.ExportSubnet) {
		errs = append(errs, fmt.Errorf("--export-subnet %q must be * or subnets, addresses and host names separated by commas", o.ExportSubnet))
	}
	if o.NFSDefaultMode != "" || o.NFSDefaultUID != "" || o.NFSDefaultGID != "" {
		errs = append(errs, errors.New("--nfs-default-mode, -uid and -gid (NFS_DEFAULT_MODE/UID/GID) apply to --mode=subdir only; in server mode set the class parameter gid"))
	}
	return errs
}

// validateSubdir appends the subdir mode's problems to errs, those found so
// far. The shares are checked together (subdir.New) only when there is no
// problem at all, since a wrong flag may be what they trip on.
func (o *Options) validateSubdir(errs []error) []error {
	if o.RunServer && o.given("run-server") {
		errs = append(errs, errors.New("--run-server applies to --mode=server only; subdir mode uses an existing NFS server"))
	}
	if o.given("device-based-fsids") {
		errs = append(errs, errors.New("--device-based-fsids applies to --mode=server only; in subdir mode file handles are the existing NFS server's business"))
	}
	shares, err := ParseShares(o.Shares)
	errs = append(errs, err)
	if _, err := o.ownership(); err != nil {
		errs = append(errs, err)
	}
	if o.NFSServer != "" || o.NFSPath != "" || len(shares) == 0 && err == nil {
		errs = append(errs, o.validateDefaultShare()...)
	}
	if errors.Join(errs...) != nil {
		return errs
	}
	// Names, duplicates and nesting of the shares together.
	cfg, _ := o.SubdirConfig()
	if _, err := subdir.New(cfg); err != nil {
		errs = append(errs, fmt.Errorf("--share: %w", err))
	}
	return errs
}

// validateDefaultShare returns the problems of the default share's flags.
func (o *Options) validateDefaultShare() []error {
	var errs []error
	if !filepath.IsAbs(o.NFSRoot) {
		errs = append(errs, fmt.Errorf("--nfs-root %q must be an absolute path", o.NFSRoot))
	}
	if o.NFSServer == "" {
		errs = append(errs, errors.New("--nfs-server (NFS_SERVER) is required in subdir mode, unless every class names a --share"))
	}
	if !filepath.IsAbs(o.NFSPath) {
		errs = append(errs, fmt.Errorf("--nfs-path (NFS_PATH) %q must be an absolute path in subdir mode", o.NFSPath))
	}
	return errs
}
