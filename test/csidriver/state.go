// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package csidriver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// StateFile is the file in Options.StateDir that holds the volumes and
// snapshots, as csi-driver-host-path's <statedir>/state.json does. Unlike
// that driver, which rewrites it in place, this one replaces it atomically
// (a temporary file, fsync, rename, fsync of the directory): a driver killed
// at any moment leaves the old state or the new one, never half of one.
const StateFile = "state.json"

// state is the content of StateFile.
type state struct {
	Volumes   []Volume         `json:"volumes"`
	Snapshots map[string]int64 `json:"snapshots,omitempty"`
}

// The order of the steps on disk makes a crash at any point recoverable:
// CreateVolume makes the volume's directory (a clone's filled from its
// source) before recording the volume, DeleteVolume forgets the volume
// before removing its directory. So every volume in StateFile has its
// directory, and a directory without a volume is one whose creation was
// never answered or whose deletion was cut short: restore removes those.

// idPattern is the form of the volume ids the driver makes (uuid.NewString),
// the only names it ever joins to StateDir: an id of any other form names no
// volume of this driver and nothing on its disk.
var idPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// tempPrefix starts the name of a state file being written.
const tempPrefix = "." + StateFile + "-"

// restore loads StateFile and makes the directories agree with it: it
// removes the directories of volumes it does not hold and the temporary
// files of writes cut short, and fails if a volume has lost its directory.
func (d *Driver) restore() error {
	dir := d.opts.StateDir
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	st, err := readState(dir)
	if err != nil {
		return err
	}
	for i := range st.Volumes {
		v := st.Volumes[i]
		d.volumes[v.Name] = &v
	}
	for id, size := range st.Snapshots {
		d.snapshots[id] = size
	}
	orphans, missing, err := compareDirs(dir, st.Volumes)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("volumes %s in %s have no directory", strings.Join(missing, ", "), filepath.Join(dir, StateFile))
	}
	for _, id := range orphans {
		if err := os.RemoveAll(filepath.Join(dir, id)); err != nil {
			return err
		}
		d.logf("Removed the directory of %s: no volume has that id (a creation not answered, or a deletion cut short)", id)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// readState reads StateFile in dir; none yet is an empty state.
func readState(dir string) (state, error) {
	var st state
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("parsing %s: %w", filepath.Join(dir, StateFile), err)
	}
	return st, nil
}

// ReadState returns the volumes recorded in the StateFile of a driver's
// StateDir, sorted by name: what a driver running in another process holds.
func ReadState(dir string) ([]Volume, error) {
	st, err := readState(dir)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(st.Volumes, func(a, b Volume) int { return strings.Compare(a.Name, b.Name) })
	return st.Volumes, nil
}

// CheckStateDir compares the directories of a StateDir with its StateFile:
// an error names every directory no volume has (leaked storage) and every
// volume without its directory (lost storage). A driver that is idle and
// was not killed meanwhile passes.
func CheckStateDir(dir string) error {
	st, err := readState(dir)
	if err != nil {
		return err
	}
	orphans, missing, err := compareDirs(dir, st.Volumes)
	if err != nil {
		return err
	}
	var errs []error
	if len(orphans) > 0 {
		errs = append(errs, fmt.Errorf("directories of no volume in %s: %s", dir, strings.Join(orphans, ", ")))
	}
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("volumes without a directory in %s: %s", dir, strings.Join(missing, ", ")))
	}
	return errors.Join(errs...)
}

// compareDirs returns the volume directories in dir of no volume in
// volumes, and the ids of the volumes that have none.
func compareDirs(dir string, volumes []Volume) (orphans, missing []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	ids := map[string]bool{}
	for _, v := range volumes {
		ids[v.ID] = true
	}
	dirs := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() && idPattern.MatchString(e.Name()) {
			dirs[e.Name()] = true
			if !ids[e.Name()] {
				orphans = append(orphans, e.Name())
			}
		}
	}
	for _, v := range volumes {
		if !dirs[v.ID] {
			missing = append(missing, v.ID)
		}
	}
	slices.Sort(orphans)
	slices.Sort(missing)
	return orphans, missing, nil
}

// save replaces StateFile with the driver's volumes and snapshots, under the
// lock; without a StateDir it does nothing.
func (d *Driver) save() error {
	if d.opts.StateDir == "" {
		return nil
	}
	data, err := json.MarshalIndent(state{Volumes: d.volumeList(), Snapshots: d.snapshots}, "", "  ")
	if err != nil {
		return status.Errorf(codes.Internal, "encoding the state: %v", err)
	}
	if err := writeAtomically(d.opts.StateDir, StateFile, data); err != nil {
		return status.Errorf(codes.Internal, "writing the state file: %v", err)
	}
	return nil
}

// writeAtomically replaces dir/name with data: written and synced under a
// temporary name, renamed over it, the directory synced.
func writeAtomically(dir, name string, data []byte) (err error) {
	f, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	f, err := os.Open(dir) //nolint:gosec // the driver's own StateDir
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	return f.Sync()
}

// volumePath is the directory of a volume in the StateDir.
func (d *Driver) volumePath(id string) string { return filepath.Join(d.opts.StateDir, id) }

// makeDirectory creates the directory of a new volume, filled with the
// files of source if it is a clone, under the lock; without a StateDir it
// does nothing.
func (d *Driver) makeDirectory(v *Volume, source *Volume) error {
	if d.opts.StateDir == "" {
		return nil
	}
	path := d.volumePath(v.ID)
	if err := os.Mkdir(path, 0o750); err != nil {
		return status.Errorf(codes.Internal, "creating the directory of volume %s: %v", v.ID, err)
	}
	if source != nil {
		if err := os.CopyFS(path, os.DirFS(d.volumePath(source.ID))); err != nil {
			_ = os.RemoveAll(path)
			return status.Errorf(codes.Internal, "failed pre-populate data from volume %s: %v", source.ID, err)
		}
	}
	return nil
}

// removeDirectory removes what is left on disk of the volume with an id,
// under the lock: nothing for an id the driver cannot have made.
func (d *Driver) removeDirectory(id string) error {
	if d.opts.StateDir == "" || !idPattern.MatchString(id) {
		return nil
	}
	if err := os.RemoveAll(d.volumePath(id)); err != nil {
		return status.Errorf(codes.Internal, "failed to delete volume %s: %v", id, err)
	}
	return nil
}
