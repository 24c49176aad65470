// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

package ganesha

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sample = `# operator's own settings
NFS_Core_Param { Bind_addr = 127.0.0.1; }
EXPORT {
	Export_Id = 7;  # a static export, not nfs-provisioner's
	Path = "/srv/static dir";
	Pseudo = /static;
	Access_Type = RW;
	FSAL { Name = VFS; Path = "/ignored"; }
	CLIENT { Clients = 10.0.0.0/8; Export_Id = 99; }
}
`

func TestParseFindsBlocksAndIgnoresNestedKeys(t *testing.T) {
	f, err := Parse(sample)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Blocks) != 1 {
		t.Fatalf("blocks %+v, want 1", f.Blocks)
	}
	b := f.Blocks[0]
	if b.ID != 7 || b.Path != "/srv/static dir" {
		t.Errorf("block id %d path %q, want 7 %q", b.ID, b.Path, "/srv/static dir")
	}
	if !strings.HasPrefix(b.Text, "EXPORT {") || !strings.HasSuffix(b.Text, "}") {
		t.Errorf("block text %q", b.Text)
	}
}

func TestAppendRemoveKeepsIDsIncreasing(t *testing.T) {
	f, err := Parse(sample)
	if err != nil {
		t.Fatal(err)
	}
	id, err := f.NextID()
	if err != nil || id != 8 {
		t.Fatalf("NextID = %d, %v; want 8 (past the static export)", id, err)
	}
	text := f.WithExport(Export{ID: id, Path: "/export/pvc-a", Squash: SquashNone})
	f, err = Parse(text)
	if err != nil {
		t.Fatalf("%v in\n%s", err, text)
	}
	b, ok := f.ByPath("/export/pvc-a/")
	if !ok || b.ID != 8 {
		t.Fatalf("ByPath: %+v %v", b, ok)
	}
	f, err = Parse(f.WithoutExport(b))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.ByID(8); ok {
		t.Fatal("block 8 still there after removal")
	}
	if !strings.Contains(f.text, "Export_Id = 7;") || !strings.Contains(f.text, "operator's own settings") {
		t.Errorf("removal touched other content:\n%s", f.text)
	}
	// The removed id is not handed out again.
	if id, _ := f.NextID(); id != 9 {
		t.Errorf("NextID after removing 8 = %d, want 9", id)
	}
}

func TestNextIDWrapsToLowestFree(t *testing.T) {
	f, err := Parse("EXPORT { Export_Id = 65535; Path = /a; }\nEXPORT { Export_Id = 1; Path = /b; }\n")
	if err != nil {
		t.Fatal(err)
	}
	if id, err := f.NextID(); err != nil || id != 2 {
		t.Errorf("NextID = %d, %v; want 2", id, err)
	}
}

func TestParseErrors(t *testing.T) {
	for name, text := range map[string]string{
		"duplicate id":    "EXPORT { Export_Id = 1; Path = /a; }\nEXPORT { Export_Id = 1; Path = /b; }\n",
		"no path":         "EXPORT { Export_Id = 1; }\n",
		"bad id":          "EXPORT { Export_Id = 70000; Path = /a; }\n",
		"unclosed":        "EXPORT { Export_Id = 1; Path = /a;\n",
		"unbalanced":      "}\n",
		"unterminated":    `EXPORT { Path = "/a; }`,
		"bad marker":      nextIDMarker + "x\n",
		"negative marker": nextIDMarker + "-3\n",
	} {
		if _, err := Parse(text); err == nil {
			t.Errorf("%s: no error for %q", name, text)
		}
	}
}

func TestBlockShape(t *testing.T) {
	open := Export{ID: 3, Path: "/export/pvc-x", Squash: SquashRoot}.Block()
	for _, want := range []string{"Export_Id = 3;", "Path = /export/pvc-x;", "Pseudo = /export/pvc-x;", "Access_Type = RW;",
		"Squash = root_id_squash;", "SecType = sys;", "Filesystem_id = 3.3;", "Name = VFS;"} {
		if !strings.Contains(open, want) {
			t.Errorf("block lacks %q:\n%s", want, open)
		}
	}
	if strings.Contains(open, "CLIENT") {
		t.Errorf("block for all clients has a CLIENT block:\n%s", open)
	}
	limited := Export{ID: 4, Path: "/export/pvc-y", Squash: SquashNone, Clients: "10.0.0.0/8"}.Block()
	if !strings.Contains(limited, "Access_Type = None;") || !strings.Contains(limited, "Clients = 10.0.0.0/8;") {
		t.Errorf("block for a subnet:\n%s", limited)
	}
	f, err := Parse(limited)
	if err != nil || len(f.Blocks) != 1 || f.Blocks[0].ID != 4 {
		t.Errorf("rendered block does not parse back: %v %+v", err, f)
	}
}

func TestEnsureConfigWritesOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "conf", "ganesha.conf")
	o := BaseOptions{BindAddress: "127.0.0.1", GracePeriod: 90, RecoveryRoot: filepath.Join(dir, "recovery")}
	wrote, err := EnsureConfig(path, o)
	if err != nil || !wrote {
		t.Fatalf("EnsureConfig = %v, %v", wrote, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Bind_addr = 127.0.0.1;", "Grace_Period = 90;", "RecoveryRoot = " + o.RecoveryRoot + ";", "MNT_Port = 20048;"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("base configuration lacks %q:\n%s", want, b)
		}
	}
	if _, err := os.Stat(o.RecoveryRoot); err != nil {
		t.Errorf("recovery directory: %v", err)
	}
	if err := os.WriteFile(path, []byte("# mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if wrote, err := EnsureConfig(path, o); err != nil || wrote {
		t.Fatalf("second EnsureConfig = %v, %v; want false, nil", wrote, err)
	}
	if b, _ := os.ReadFile(path); string(b) != "# mine\n" {
		t.Errorf("existing configuration overwritten: %q", b)
	}
}

func TestWriteFileAtomicKeepsMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(path, "b"); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "b" || st.Mode().Perm() != 0o600 {
		t.Errorf("content %q mode %s", b, st.Mode())
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
}

// TestDeviceBasedFsids: the classic --device-based-fsids is Ganesha's
// fsid_device, written into a new configuration only when given; an
// existing configuration (the classic provisioner wrote fsid_device = true
// into its vfs.conf) is never rewritten, and a flag that disagrees with it
// stops the start naming the file.
func TestDeviceBasedFsids(t *testing.T) {
	yes := true
	if c := BaseConfig(BaseOptions{}); strings.Contains(c, "fsid_device") {
		t.Errorf("without the flag the configuration sets fsid_device:\n%s", c)
	}
	if c := BaseConfig(BaseOptions{FsidDevice: &yes}); !strings.Contains(c, "\tfsid_device = true;\n") {
		t.Errorf("--device-based-fsids=true: no fsid_device = true in\n%s", c)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		text string
		want bool
		ok   bool
	}{
		{"NFS_Core_Param {\n\tfsid_device = true;\n}\n", true, true},
		{"NFS_Core_Param {\n\tFSID_DEVICE = TRUE;\n}\n", true, true},
		{"NFS_Core_Param {\n\tfsid_device = true;\n}\n", false, false},
		{"NFS_Core_Param {\n\t# fsid_device = true;\n}\n", false, true},
		{"NFS_Core_Param {\n\tMNT_Port = 20048;\n}\n", true, false},
	} {
		path := filepath.Join(dir, "vfs.conf")
		if err := os.WriteFile(path, []byte(c.text), 0o600); err != nil {
			t.Fatal(err)
		}
		err := CheckFsidDevice(path, c.want)
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), path)) {
			t.Errorf("CheckFsidDevice(%q, %t) = %v; want ok %t, an error naming the file", c.text, c.want, err, c.ok)
		}
	}
}
