// Copyright 2026 The external-storage Authors.
// SPDX-License-Identifier: Apache-2.0

// Package ganesha manages the NFS-Ganesha side of server mode: the EXPORT
// blocks of the configuration file (the source of truth for exports and their
// ids, re-read on every change), the D-Bus export manager, and the base
// configuration written on first start.
package ganesha

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Squash values written into EXPORT blocks.
const (
	SquashNone = "no_root_squash"
	SquashRoot = "root_id_squash"
)

// DefaultClients is the client list meaning everybody.
const DefaultClients = "*"

// Export is one EXPORT block as nfs-provisioner writes it.
type Export struct {
	ID     uint16
	Path   string
	Squash string
	// Clients restricts access (a subnet, host or comma-separated list); "" or
	// DefaultClients means everybody.
	Clients string
}

// Block renders the EXPORT block. The pseudo path equals the directory so
// that NFSv3 and NFSv4 clients use the same path; the fsid is derived from
// the id so that it never changes across restarts (clients keep their file
// handles).
func (e Export) Block() string {
	var b strings.Builder
	fmt.Fprintf(&b, "EXPORT {\n")
	fmt.Fprintf(&b, "\tExport_Id = %d;\n", e.ID)
	fmt.Fprintf(&b, "\tPath = %s;\n", e.Path)
	fmt.Fprintf(&b, "\tPseudo = %s;\n", e.Path)
	if e.Clients == "" || e.Clients == DefaultClients {
		fmt.Fprintf(&b, "\tAccess_Type = RW;\n")
	} else {
		// Nobody but the listed clients: the export itself grants nothing.
		fmt.Fprintf(&b, "\tAccess_Type = None;\n")
	}
	fmt.Fprintf(&b, "\tSquash = %s;\n", e.Squash)
	fmt.Fprintf(&b, "\tSecType = sys;\n")
	fmt.Fprintf(&b, "\tFilesystem_id = %d.%d;\n", e.ID, e.ID)
	if e.Clients != "" && e.Clients != DefaultClients {
		fmt.Fprintf(&b, "\tCLIENT {\n\t\tClients = %s;\n\t\tAccess_Type = RW;\n\t}\n", e.Clients)
	}
	fmt.Fprintf(&b, "\tFSAL {\n\t\tName = VFS;\n\t}\n")
	fmt.Fprintf(&b, "}\n")
	return b.String()
}

// Block is an EXPORT block found in a configuration file.
type Block struct {
	ID   uint16
	Path string
	// Text is the block as written, from EXPORT to its closing brace.
	Text string
	// start and end are byte offsets of the block including its trailing newline.
	start, end int
}

// nextIDMarker is a comment that records the next Export_Id to allocate, so
// that the id of a removed block is not handed out again soon: a client that
// still holds file handles of the old export must get ESTALE, never another
// volume's data. Ganesha ignores comments.
const nextIDMarker = "# nfs-provisioner next Export_Id = "

// File is a parsed Ganesha configuration file.
type File struct {
	text   string
	Blocks []Block
	// nextID is the value of the next-id marker, 0 when absent.
	nextID int
}

// ParseFile reads and parses path. A missing file is an error.
func ParseFile(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("ganesha configuration %s: %w", path, err)
	}
	return f, nil
}

// Parse finds the EXPORT blocks of a configuration text.
func Parse(text string) (*File, error) {
	toks, err := tokenize(text)
	if err != nil {
		return nil, err
	}
	f := &File{text: text}
	if f.nextID, err = parseNextID(text); err != nil {
		return nil, err
	}
	if f.Blocks, err = parseBlocks(text, toks); err != nil {
		return nil, err
	}
	seen := map[uint16]bool{}
	for _, b := range f.Blocks {
		if seen[b.ID] {
			return nil, fmt.Errorf("Export_Id %d is used by more than one EXPORT block", b.ID)
		}
		seen[b.ID] = true
	}
	return f, nil
}

// parseNextID reads the next-id marker's value, the last one's if there are
// several; 0 without a marker.
func parseNextID(text string) (int, error) {
	nextID := 0
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), nextIDMarker); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < 0 {
				return 0, fmt.Errorf("bad %q line: %q", strings.TrimSpace(nextIDMarker), line)
			}
			nextID = n
		}
	}
	return nextID, nil
}

// parseBlocks returns the top-level EXPORT blocks, checking that braces
// balance.
func parseBlocks(text string, toks []token) ([]Block, error) {
	var blocks []Block
	depth := 0
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch t.kind {
		case tokOpen:
			depth++
		case tokClose:
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("line %d: unbalanced }", t.line)
			}
		case tokWord:
			if depth != 0 || !isExportStart(toks, i) {
				continue
			}
			blk, next, err := parseExport(text, toks, i)
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, blk)
			i = next
		}
	}
	if depth != 0 {
		return nil, errors.New("unbalanced {")
	}
	return blocks, nil
}

// isExportStart reports whether toks[i] is the keyword of an EXPORT block.
func isExportStart(toks []token, i int) bool {
	return strings.EqualFold(toks[i].text, "EXPORT") && i+1 < len(toks) && toks[i+1].kind == tokOpen
}

// parseExport reads the EXPORT block whose keyword is toks[i] and returns it
// with the index of its closing brace.
func parseExport(text string, toks []token, i int) (Block, int, error) {
	kw := toks[i]
	depth := 0
	var id, path string
	for j := i + 1; j < len(toks); j++ {
		switch toks[j].kind {
		case tokOpen:
			depth++
		case tokClose:
			depth--
			if depth == 0 {
				blk, err := newBlock(text, kw, toks[j], id, path)
				if err != nil {
					return Block{}, 0, err
				}
				return blk, j, nil
			}
		case tokWord:
			// Only the export's own keys, not those of its CLIENT or FSAL blocks.
			if depth == 1 {
				readExportKey(toks, j, &id, &path)
			}
		}
	}
	return Block{}, 0, fmt.Errorf("line %d: EXPORT block is not closed", kw.line)
}

// readExportKey sets id or path when toks[j] starts an assignment of
// Export_Id or Path.
func readExportKey(toks []token, j int, id, path *string) {
	if j+2 >= len(toks) || toks[j+1].kind != tokEquals {
		return
	}
	switch {
	case strings.EqualFold(toks[j].text, "Export_Id"):
		*id = toks[j+2].text
	case strings.EqualFold(toks[j].text, "Path"):
		*path = toks[j+2].text
	}
}

// newBlock is the EXPORT block from its keyword kw to its closing brace,
// with the values of its Export_Id and Path.
func newBlock(text string, kw, closing token, id, path string) (Block, error) {
	if id == "" || path == "" {
		return Block{}, fmt.Errorf("line %d: EXPORT block without Export_Id or Path", kw.line)
	}
	n, err := strconv.ParseUint(id, 10, 16)
	if err != nil {
		return Block{}, fmt.Errorf("line %d: Export_Id %q is not a number from 0 to 65535", kw.line, id)
	}
	start := lineStart(text, kw.pos)
	end := closing.pos + 1
	full := end
	if full < len(text) && text[full] == '\n' {
		full++
	}
	return Block{ID: uint16(n), Path: path, Text: text[kw.pos:end], start: start, end: full}, nil
}

// lineStart returns pos moved back to the start of its line when only blanks
// precede it there, so that removing a block leaves no stray indentation.
func lineStart(text string, pos int) int {
	p := pos
	for p > 0 && (text[p-1] == ' ' || text[p-1] == '\t') {
		p--
	}
	if p == 0 || text[p-1] == '\n' {
		return p
	}
	return pos
}

// ByPath returns the block exporting path.
func (f *File) ByPath(path string) (Block, bool) {
	for _, b := range f.Blocks {
		if filepath.Clean(b.Path) == filepath.Clean(path) {
			return b, true
		}
	}
	return Block{}, false
}

// ByID returns the block with Export_Id id.
func (f *File) ByID(id uint16) (Block, bool) {
	for _, b := range f.Blocks {
		if b.ID == id {
			return b, true
		}
	}
	return Block{}, false
}

// NextID returns the Export_Id for a new block: one past the highest id ever
// allocated (the marker) or present, so that ids are not reused while they may
// still be known to clients; when that overflows, the lowest id no block
// uses. Id 0 is the pseudo root's and never allocated.
func (f *File) NextID() (uint16, error) {
	next := max(f.nextID, 1)
	used := map[int]bool{}
	for _, b := range f.Blocks {
		used[int(b.ID)] = true
		next = max(next, int(b.ID)+1)
	}
	if next <= 65535 {
		return uint16(next), nil
	}
	for id := 1; id <= 65535; id++ {
		if !used[id] {
			return uint16(id), nil
		}
	}
	return 0, errors.New("all 65535 Export_Ids are in use")
}

// WithExport returns the text with block appended and the next-id marker
// moved past its id.
func (f *File) WithExport(e Export) string {
	text := f.withoutMarker()
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	next := max(f.nextID, int(e.ID)+1)
	return text + "\n" + e.Block() + nextIDMarker + strconv.Itoa(next) + "\n"
}

// WithoutExport returns the text with block b removed; the marker stays.
func (f *File) WithoutExport(b Block) string {
	return f.text[:b.start] + f.text[b.end:]
}

// withoutMarker returns the text without the next-id marker lines.
func (f *File) withoutMarker() string {
	var out []string
	for _, line := range strings.SplitAfter(f.text, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), nextIDMarker) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// WriteFileAtomic replaces path with text so that Ganesha, which reads the
// file on AddExport and at start, never sees half of it.
func WriteFileAtomic(path, text string) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	mode := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	if _, err := tmp.WriteString(text); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

type tokKind int

const (
	tokWord tokKind = iota
	tokOpen
	tokClose
	tokEquals
	tokSemi
)

type token struct {
	kind tokKind
	text string
	pos  int
	line int
}

// tokenize splits Ganesha's configuration syntax: words, quoted strings,
// braces, '=', ';' and '#' comments to the end of the line.
func tokenize(text string) ([]token, error) {
	var toks []token
	line := 1
	for i := 0; i < len(text); {
		c := text[i]
		switch c {
		case '\n':
			line++
			i++
		case ' ', '\t', '\r':
			i++
		case '#':
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case '{':
			toks = append(toks, token{tokOpen, "{", i, line})
			i++
		case '}':
			toks = append(toks, token{tokClose, "}", i, line})
			i++
		case '=':
			toks = append(toks, token{tokEquals, "=", i, line})
			i++
		case ';':
			toks = append(toks, token{tokSemi, ";", i, line})
			i++
		case '"', '\'':
			end := strings.IndexByte(text[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("line %d: unterminated quoted string", line)
			}
			s := text[i+1 : i+1+end]
			toks = append(toks, token{tokWord, s, i, line})
			line += strings.Count(s, "\n")
			i += end + 2
		default:
			j := i
			for j < len(text) && !strings.ContainsRune(" \t\r\n{}=;#\"'", rune(text[j])) {
				j++
			}
			toks = append(toks, token{tokWord, text[i:j], i, line})
			i = j
		}
	}
	return toks, nil
}
